package advisory_test

import (
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// TestSessionKillNotice: a server-side kill of the holding session is
// reported (Done, Do's context). On PostgreSQL the socket watch reports it
// within microseconds of the server's FATAL error, with no query: the
// check interval is an hour, so the periodic check cannot be what reports
// it (the code before the watch fails here). On MariaDB, whose driver does
// not expose its socket, the periodic check reports it, about one check
// interval after the kill, while the key is handed on at once. Figures are
// logged, not asserted (run with -v).
func TestSessionKillNotice(t *testing.T) {
	for _, tc := range []struct {
		d      sqllock.Dialect
		rounds int
		check  time.Duration
	}{
		// An hour: only the socket watch can report the kill in time.
		{sqllock.Postgres, 25, time.Hour},
		{sqllock.MariaDB, 5, advisory.DefaultCheckInterval},
		{sqllock.MariaDB, 5, 10 * time.Millisecond},
	} {
		t.Run(tc.d.String()+"/check="+tc.check.String(), func(t *testing.T) {
			db := testdb.Open(t, tc.d)
			holder := newLocker(t, db, advisory.WithCheckInterval(tc.check))
			contender := newLocker(t, testdb.Fresh(t, tc.d, 0))
			r := locktest.KillNotice(t, locktest.KillSpec{
				Holder:    holder,
				Contender: contender,
				Session: func(t testing.TB, l sqllock.Lease) int64 {
					ids := holders(t, db, l.Key())
					if len(ids) != 1 {
						t.Fatalf("server shows holders %v of %q, want one", ids, l.Key())
					}
					return ids[0]
				},
				Kill:   func(t testing.TB, id int64) { killSession(t, db, id) },
				Rounds: tc.rounds,
			})
			t.Log(r.Summary(tc.d.String() + ", check interval " + tc.check.String()))
		})
	}
}
