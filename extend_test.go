package sqllock_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/optimistic"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// extendKind is one kind of lease the repository hands out.
type extendKind struct {
	name     string
	dialects []sqllock.Dialect
	acquire  func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease
	// table holds the lease's row, found by its token: an Extend must
	// move its expiry. Empty for a lease Extend refuses.
	table string
	// why: the words a refusal's text must hold, saying the true reason.
	why []string
}

// servers are the dialects with session and row locks.
func serverDialects() []sqllock.Dialect {
	return slices.DeleteFunc(slices.Clone(testdb.Dialects), func(d sqllock.Dialect) bool { return d == sqllock.SQLite })
}

// held fails the test on err, and returns lease.
func held(t testing.TB, lease sqllock.Lease, err error) sqllock.Lease {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// closeLater fails the test on err, and closes c when it ends.
func closeLater(t testing.TB, c io.Closer, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
}

var extendKinds = []extendKind{
	{"tablelock", testdb.Dialects, func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease {
		lease, err := newTableLocker(t, db).Acquire(ctx, key)
		return held(t, lease, err)
	}, tablelock.DefaultTable, nil},
	{"semaphore", testdb.Dialects, func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease {
		s, err := semaphore.New(db.DB, db.Dialect)
		closeLater(t, s, err)
		p, err := s.Acquire(ctx, key, 2)
		return held(t, p, err)
	}, semaphore.DefaultTable, nil},
	{"rwlock-read", testdb.Dialects, func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease {
		rw, err := rwlock.New(db.DB, db.Dialect, 4)
		closeLater(t, rw, err)
		r, err := rw.RLock(ctx, key)
		return held(t, r, err)
	}, rwlock.DefaultTable, nil},
	{"rwlock-write", testdb.Dialects, func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease {
		rw, err := rwlock.New(db.DB, db.Dialect, 4)
		closeLater(t, rw, err)
		w, err := rw.Lock(ctx, key)
		return held(t, w, err)
	}, rwlock.DefaultTable, nil},
	{"election", testdb.Dialects, func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease {
		e, err := election.New(db.DB, db.Dialect)
		closeLater(t, e, err)
		lead, err := e.Campaign(ctx, key, "me")
		return held(t, lead, err)
	}, tablelock.DefaultTable, nil},
	{"jobguard", testdb.Dialects, func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease {
		g, err := jobguard.New(db.DB, db.Dialect)
		closeLater(t, g, err)
		run, err := g.TryAcquire(ctx, jobguard.Job{Name: key, AtMost: 30 * time.Second})
		return held(t, run, err)
	}, jobguard.DefaultTable, nil},
	{"multi-tablelock", testdb.Dialects, func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease {
		m, err := sqllock.AcquireAll(ctx, newTableLocker(t, db), key+"/a", key+"/b")
		return held(t, m, err)
	}, "", []string{"MultiLease", "Part"}},
	{"optimistic", testdb.Dialects, func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease {
		l, err := optimistic.New(db.DB, db.Dialect)
		closeLater(t, l, err)
		lease, err := l.Acquire(ctx, key)
		return held(t, lease, err)
	}, "", []string{"*optimistic.Lease", "version stamp"}},
	{"rowlock", serverDialects(), func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease {
		l, err := rowlock.New(db.DB, db.Dialect)
		closeLater(t, l, err)
		lease, err := l.Acquire(ctx, key)
		return held(t, lease, err)
	}, "", []string{"*rowlock.Lease", "transaction"}},
	{"advisory", serverDialects(), func(t testing.TB, ctx context.Context, db *testdb.DB, key string) sqllock.Lease {
		l, err := advisory.New(db.DB, db.Dialect)
		closeLater(t, l, err)
		lease, err := l.Acquire(ctx, key)
		return held(t, lease, err)
	}, "", []string{"*advisory.Lease", "session"}},
}

// leftByToken reads how long the row of token in table stays taken, on
// the database clock.
func leftByToken(t testing.TB, db *testdb.DB, table string, token int64) time.Duration {
	t.Helper()
	q := map[sqllock.Dialect]string{
		sqllock.Postgres: "SELECT (extract(epoch FROM expires_at - now()) * 1000000)::bigint FROM " + table + " WHERE token = $1",
		sqllock.MariaDB:  "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM " + table + " WHERE token = ?",
		sqllock.MySQL:    "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM " + table + " WHERE token = ?",
		sqllock.SQLite:   "SELECT expires_at - CAST(unixepoch('subsec') * 1000000 AS INTEGER) FROM " + table + " WHERE token = ?",
	}[db.Dialect]
	var us int64
	if err := db.QueryRowContext(context.Background(), q, token).Scan(&us); err != nil {
		t.Fatalf("the row of token %d in %s: %v", token, table, err)
	}
	return time.Duration(us) * time.Microsecond
}

// TestExtendContract: sqllock.Extend over every kind of lease in the
// repository. An Extender's row expiry moves later on the database and
// the lease stays held; every other lease is refused with an error
// matching ErrUnsupported that names the key and says the true reason,
// and no dialect (none is at fault); either way the lease stays held.
func TestExtendContract(t *testing.T) {
	const ext = 10 * time.Minute
	for _, k := range extendKinds {
		t.Run(k.name, func(t *testing.T) {
			for _, d := range k.dialects {
				t.Run(d.String(), func(t *testing.T) {
					t.Parallel()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					db := testdb.Open(t, d)
					key := locktest.Key(t)
					lease := k.acquire(t, ctx, db, key)
					defer lease.Release(ctx)
					var before time.Duration
					if k.table != "" {
						before = leftByToken(t, db, k.table, lease.Token())
					}
					err := sqllock.Extend(ctx, lease, ext)
					_, extender := lease.(sqllock.Extender)
					if k.table != "" {
						if !extender || err != nil {
							t.Fatalf("Extender %v, Extend: %v", extender, err)
						}
						if after := leftByToken(t, db, k.table, lease.Token()); after <= before+time.Minute || after > ext {
							t.Fatalf("Extend(%v) moved the row's expiry from %v to %v ahead, want later, within %v", ext, before, after, ext)
						}
					} else {
						if extender || !errors.Is(err, sqllock.ErrUnsupported) || !strings.Contains(err.Error(), key) {
							t.Fatalf("Extender %v, Extend: %v; want ErrUnsupported naming %q", extender, err, key)
						}
						t.Logf("Extend: %v", err)
						for _, w := range k.why {
							if !strings.Contains(err.Error(), w) {
								t.Errorf("Extend: %q does not say %q", err, w)
							}
						}
						if strings.Contains(err.Error(), "dialect") {
							t.Errorf("Extend: %q blames the dialect", err)
						}
					}
					if err := lease.Err(); err != nil {
						t.Fatalf("the lease after Extend: %v", err)
					}
				})
			}
		})
	}
}
