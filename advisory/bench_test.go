package advisory_test

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// rawLock is the plain SQL a careful hand-written version runs on one
// pinned connection: blocking lock, unlock, statements prepared once.
type rawLock struct {
	conn         *sql.Conn
	lock, unlock *sql.Stmt
	arg          any
}

// rawKinds are the raw sides: the bare lock functions, and the same
// drawing a fencing token once granted, as the Locker's statements do. The
// second shows what the token costs, apart from all else the Locker does.
var rawKinds = []struct {
	name  string
	token bool
}{{"raw", false}, {"raw-token", true}}

func newRaw(b *testing.B, db *testdb.DB, key string, token bool) *rawLock {
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	r := &rawLock{conn: c}
	lock, unlock := "SELECT pg_advisory_lock($1)", "SELECT pg_advisory_unlock($1)"
	if token {
		lock = "SELECT sqllock_next_token() FROM (SELECT pg_advisory_lock($1) OFFSET 0) AS granted"
	}
	r.arg = advisory.PostgresKey(advisory.DefaultNamespace, key)
	if db.Dialect.IsMySQL() {
		lock, unlock = "SELECT GET_LOCK(?, 60)", "SELECT RELEASE_LOCK(?)"
		if token {
			lock = "SELECT IF(GET_LOCK(?, 60) = 1, NEXTVAL(sqllock_fence_seq), NULL)"
		}
		r.arg = advisory.MySQLName(advisory.DefaultNamespace, key)
	}
	if r.lock, err = c.PrepareContext(ctx, lock); err != nil {
		b.Fatal(err)
	}
	if r.unlock, err = c.PrepareContext(ctx, unlock); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.lock.Close(); r.unlock.Close(); c.Close() })
	return r
}

func (r *rawLock) cycle(b *testing.B) {
	var got any // void on PostgreSQL, 1 from GET_LOCK, or the token
	ctx := context.Background()
	if err := r.lock.QueryRowContext(ctx, r.arg).Scan(&got); err != nil || got == nil {
		b.Fatal("lock:", got, err)
	}
	var ok sql.NullBool
	if err := r.unlock.QueryRowContext(ctx, r.arg).Scan(&ok); err != nil || !ok.Bool {
		b.Fatal("unlock:", ok, err)
	}
}

// BenchmarkAcquireRelease: uncontended Acquire+Release beside the raw
// lock/unlock pair on one connection, in the same run.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, d := range dialects {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			ctx := context.Background()
			b.Run("sqllock", func(b *testing.B) {
				l := newLocker(b, db)
				key := locktest.Key(b)
				for b.Loop() {
					lease, err := l.Acquire(ctx, key)
					if err != nil {
						b.Fatal(err)
					}
					if err := lease.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
			for _, k := range rawKinds {
				b.Run(k.name, func(b *testing.B) {
					r := newRaw(b, db, locktest.Key(b), k.token)
					for b.Loop() {
						r.cycle(b)
					}
				})
			}
		})
	}
}

// BenchmarkHotKey: 8 clients, each with its own Locker (or connection, for
// raw), take turns on one key. ns/op is per Acquire+Release across all;
// min-share is the least-served client's share of the turns times 8 (1 is
// perfectly even, 0 is a starved client).
func BenchmarkHotKey(b *testing.B) {
	const clients = 8
	for _, d := range dialects {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			ctx := context.Background()
			run := func(b *testing.B, cycle []func()) {
				var left atomic.Int64
				left.Store(int64(b.N))
				counts := make([]int, clients)
				var wg sync.WaitGroup
				b.ResetTimer()
				for i := range clients {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							cycle[i]()
							counts[i]++
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				if b.N >= 100*clients {
					b.ReportMetric(float64(slices.Min(counts))*clients/float64(b.N), "min-share")
				}
			}
			b.Run("sqllock", func(b *testing.B) {
				key := locktest.Key(b)
				cycle := make([]func(), clients)
				for i := range cycle {
					l := newLocker(b, db)
					cycle[i] = func() {
						lease, err := l.Acquire(ctx, key)
						if err != nil {
							panic(err)
						}
						if err := lease.Release(ctx); err != nil {
							panic(err)
						}
					}
				}
				run(b, cycle)
			})
			for _, k := range rawKinds {
				b.Run(k.name, func(b *testing.B) {
					key := locktest.Key(b)
					cycle := make([]func(), clients)
					for i := range cycle {
						r := newRaw(b, db, key, k.token)
						cycle[i] = func() { r.cycle(b) }
					}
					run(b, cycle)
				})
			}
		})
	}
}

// BenchmarkHandoff: release → a blocked waiter in another Locker of this
// process returns. Waiters in other processes are bounded by the backoff
// cap instead (WithMaxBackoff).
func BenchmarkHandoff(b *testing.B) {
	for _, d := range dialects {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			locktest.BenchHandoff(b, newLocker(b, db), newLocker(b, db))
		})
	}
}

// BenchmarkPaired alternates one uncontended Acquire+Release through the
// Locker with one raw lock/unlock pair of each kind, iteration by
// iteration, so load on a shared machine hits them alike. speed-ratio is
// raw time over sqllock time (1 means as fast as raw SQL), token-ratio the
// same against the raw pair that draws the token, without-token-speed-ratio
// raw time over a Locker WithoutToken's.
func BenchmarkPaired(b *testing.B) {
	for _, d := range dialects {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			ctx := context.Background()
			l := newLocker(b, db)
			bare := newLocker(b, db, advisory.WithoutToken())
			key := locktest.Key(b)
			raws := []*rawLock{newRaw(b, db, locktest.Key(b), false), newRaw(b, db, locktest.Key(b), true)}
			var ours, untokened []time.Duration
			theirs := make([][]time.Duration, len(raws))
			cycle := func(l *advisory.Locker, into *[]time.Duration) {
				start := time.Now()
				lease, err := l.Acquire(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
				*into = append(*into, time.Since(start))
			}
			for b.Loop() {
				cycle(l, &ours)
				cycle(bare, &untokened)
				for i, r := range raws {
					start := time.Now()
					r.cycle(b)
					theirs[i] = append(theirs[i], time.Since(start))
				}
			}
			o := p50(ours)
			w, t := p50(theirs[0]), p50(theirs[1])
			b.ReportMetric(float64(o.Microseconds()), "sqllock-p50-us")
			b.ReportMetric(float64(w.Microseconds()), "raw-p50-us")
			b.ReportMetric(float64(t.Microseconds()), "raw-token-p50-us")
			b.ReportMetric(float64(w)/float64(o), "speed-ratio")
			b.ReportMetric(float64(t)/float64(o), "token-ratio")
			u := p50(untokened)
			b.ReportMetric(float64(u.Microseconds()), "without-token-p50-us")
			b.ReportMetric(float64(w)/float64(u), "without-token-speed-ratio")
		})
	}
}

func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}
