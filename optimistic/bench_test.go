package optimistic_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

// BenchmarkHotRow decrements one hot item from 16 goroutines (8 per CPU)
// in one run per dialect: the atomic guarded UPDATE (the floor), the
// optimistic CAS loop (plain, and Modify with its in-process queue), the
// rowlock pattern written out (BEGIN; SELECT ... FOR UPDATE; UPDATE;
// COMMIT) and striped counters with 1, 4 and 16 stripes. dec/s is the rate
// to compare; retries/op is the CAS's conflict rate.
func BenchmarkHotRow(b *testing.B) {
	for _, d := range testdb.Dialects {
		b.Run(d.String(), func(b *testing.B) {
			conns := 16
			if d == sqllock.SQLite {
				conns = 1 // one writer at a time: more connections only add busy waits
			}
			db := testdb.Fresh(b, d, conns)
			name := stockTable(b, db, 1<<40)
			ph := func(i int) string {
				if d == sqllock.Postgres {
					return fmt.Sprintf("$%d", i)
				}
				return "?"
			}
			ctx := context.Background()

			b.Run("atomic", func(b *testing.B) {
				st := prepare(b, db, "UPDATE "+name+" SET qty = qty - 1 WHERE id = "+ph(1)+" AND qty > 0")
				hot(b, func() error {
					res, err := st.ExecContext(ctx, 1)
					if err == nil {
						err = oneRow(res)
					}
					return err
				})
			})

			tb := newTable(b, db, name, optimistic.WithLocalQueue(false))
			policy := optimistic.LimitAttempts(optimistic.ExponentialBackoff(50*time.Microsecond, 2*time.Millisecond), 1000)
			b.Run("cas", func(b *testing.B) {
				var conflicts atomic.Int64
				hot(b, func() error {
					return optimistic.Retry(ctx, policy, func(ctx context.Context) error {
						it, err := optimistic.Load[item](ctx, db.DB, tb, 1)
						if err != nil {
							return optimistic.Stop(err)
						}
						_, err = tb.Update(ctx, db.DB, 1, it.Version, optimistic.Set{Column: "qty", Value: it.Qty - 1})
						if err != nil {
							conflicts.Add(1)
						}
						return err
					})
				})
				b.ReportMetric(float64(conflicts.Load())/float64(b.N), "retries/op")
			})

			queued := newTable(b, db, name)
			b.Run("cas-queued", func(b *testing.B) {
				var attempts atomic.Int64
				hot(b, func() error {
					_, err := optimistic.Modify(ctx, db.DB, queued, 1, policy, func(it *item) error {
						attempts.Add(1)
						it.Qty--
						return nil
					})
					return err
				})
				b.ReportMetric(float64(attempts.Load()-int64(b.N))/float64(b.N), "retries/op")
			})

			if d != sqllock.SQLite { // no FOR UPDATE: SQLite has no row locks
				b.Run("rowlock", func(b *testing.B) {
					sel := "SELECT qty FROM " + name + " WHERE id = " + ph(1) + " FOR UPDATE"
					upd := "UPDATE " + name + " SET qty = " + ph(1) + " WHERE id = " + ph(2)
					hot(b, func() error {
						tx, err := db.BeginTx(ctx, nil)
						if err != nil {
							return err
						}
						defer tx.Rollback()
						var qty int64
						if err := tx.QueryRowContext(ctx, sel, 1).Scan(&qty); err != nil {
							return err
						}
						if _, err := tx.ExecContext(ctx, upd, qty-1, 1); err != nil {
							return err
						}
						return tx.Commit()
					})
				})
			}

			for _, n := range []int{1, 4, 16} {
				b.Run(fmt.Sprintf("striped-%d", n), func(b *testing.B) {
					c, err := optimistic.NewCounter(db.DB, d, counterTable(b, db), n)
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					if err := c.Set(ctx, "hot", 1<<40); err != nil {
						b.Fatal(err)
					}
					hot(b, func() error { return c.Take(ctx, "hot") })
				})
			}
		})
	}
}

// hot runs op from 8 goroutines per CPU and reports decrements per second.
func hot(b *testing.B, op func() error) {
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "dec/s")
}

func prepare(b *testing.B, db *testdb.DB, q string) *sql.Stmt {
	b.Helper()
	st, err := db.PrepareContext(context.Background(), q)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func oneRow(res sql.Result) error {
	n, err := res.RowsAffected()
	if err == nil && n != 1 {
		err = fmt.Errorf("%d rows updated, want 1", n)
	}
	return err
}

// BenchmarkLocker stamps and releases keys through one Locker: serially,
// and from 4 goroutines per CPU on keys of their own (the Locker's own
// bookkeeping is all they share).
func BenchmarkLocker(b *testing.B) {
	for _, d := range testdb.Dialects {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Fresh(b, d, 8)
			l, err := optimistic.New(db.DB, d)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			ctx := context.Background()
			var n atomic.Int64
			cycle := func(key string) error {
				lease, err := l.Acquire(ctx, key)
				if err != nil {
					return err
				}
				return lease.Release(ctx)
			}
			b.Run("serial", func(b *testing.B) {
				key := fmt.Sprintf("bench/%d", n.Add(1))
				for b.Loop() {
					if err := cycle(key); err != nil {
						b.Fatal(err)
					}
				}
			})
			if d == sqllock.SQLite {
				return // one writer at a time: parallel stamps only add busy waits
			}
			b.Run("parallel", func(b *testing.B) {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					key := fmt.Sprintf("bench/%d", n.Add(1))
					for pb.Next() {
						if err := cycle(key); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}
