package rowlock_test

import (
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestSessionKillNotice: a server-side kill of the session whose
// transaction holds the row is reported (Done, Do's context). On
// PostgreSQL the socket watch reports it, with no query: the check
// interval is an hour, so the monitor cannot be what reports it (the code
// before the watch fails here). On MariaDB the monitor reports it, about
// one check interval after the kill. Figures are logged, not asserted (run
// with -v).
func TestSessionKillNotice(t *testing.T) {
	for _, tc := range []struct {
		d      sqllock.Dialect
		rounds int
		check  time.Duration
	}{
		{sqllock.Postgres, 25, time.Hour},
		{sqllock.MariaDB, 5, rowlock.DefaultCheckInterval},
	} {
		t.Run(tc.d.String()+"/check="+tc.check.String(), func(t *testing.T) {
			db := testdb.Open(t, tc.d)
			r := locktest.KillNotice(t, locktest.KillSpec{
				Holder:    newLocker(t, db, rowlock.WithCheckInterval(tc.check)),
				Contender: newLocker(t, testdb.Fresh(t, tc.d, 0)),
				Session:   func(t testing.TB, l sqllock.Lease) int64 { return sessionOf(t, tc.d, l) },
				Kill:      func(t testing.TB, id int64) { killSession(t, db, id) },
				Rounds:    tc.rounds,
			})
			t.Log(r.Summary(tc.d.String() + ", check interval " + tc.check.String()))
		})
	}
}
