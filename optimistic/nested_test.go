package optimistic_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

// rowsTable creates a table like stockTable's with rows 1..n, qty 0.
func rowsTable(t testing.TB, db *testdb.DB, n int) string {
	t.Helper()
	name := stockTable(t, db, 0)
	for id := 2; id <= n; id++ {
		exec(t, db, "INSERT INTO "+name+" (id, qty, version, label) VALUES (?, 0, 1, 'widget')", id)
	}
	return name
}

func qtyOf(t testing.TB, db *testdb.DB, table string, id int) int64 {
	t.Helper()
	var q int64
	if err := db.QueryRowContext(context.Background(), rebind(db.Dialect, "SELECT qty FROM "+table+" WHERE id = ?"), id).Scan(&q); err != nil {
		t.Fatal(err)
	}
	return q
}

// deadline bounds a test that hangs when Modify deadlocks: it fails
// instead.
func deadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// patient retries conflicts for long enough that only a deadlock fails.
var patient = optimistic.LimitAttempts(optimistic.ExponentialBackoff(100*time.Microsecond, 5*time.Millisecond), 1000)

// TestModifyNestedChain: fn modifies another row of the same Table, whose
// fn modifies another, 65 deep. Modify once queued callers by 64 hash
// buckets and held the queue across fn, so two of any 65 keys shared a
// bucket (whatever the hash seed) and the inner one waited for the outer
// forever: a transfer between two such rows deadlocked itself.
func TestModifyNestedChain(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := deadline(t)
		const rows = 65
		name := rowsTable(t, db, rows)
		tb := newTable(t, db, name)
		var modify func(id int) error
		modify = func(id int) error {
			_, err := optimistic.Modify(ctx, db.DB, tb, id, patient, func(it *item) error {
				it.Qty++
				if id < rows {
					return modify(id + 1)
				}
				return nil
			})
			return err
		}
		if err := modify(1); err != nil {
			t.Fatalf("nested Modify of %d rows: %v", rows, err)
		}
		for id := 1; id <= rows; id++ {
			if q := qtyOf(t, db, name, id); q != 1 {
				t.Errorf("row %d: qty %d, want 1", id, q)
			}
		}
	})
}

// TestModifyNestedOpposite: two goroutines move units between two rows in
// opposite directions, each nesting the second row's Modify in the first
// one's fn. Queues held across fn would make each wait for the other's.
// Every Modify that returns nil wrote exactly once.
func TestModifyNestedOpposite(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := deadline(t)
		name := rowsTable(t, db, 2)
		tb := newTable(t, db, name)
		const each = 30
		var writes atomic.Int64
		var wg sync.WaitGroup
		for _, pair := range [][2]int{{1, 2}, {2, 1}} {
			wg.Go(func() {
				for range each {
					_, err := optimistic.Modify(ctx, db.DB, tb, pair[0], patient, func(it *item) error {
						it.Qty++
						_, err := optimistic.Modify(ctx, db.DB, tb, pair[1], patient, func(it *item) error {
							it.Qty++
							return nil
						})
						if err == nil {
							writes.Add(1)
						}
						return err
					})
					if err != nil {
						t.Errorf("transfer %d -> %d: %v", pair[0], pair[1], err)
						return
					}
					writes.Add(1)
				}
			})
		}
		wg.Wait()
		if got := qtyOf(t, db, name, 1) + qtyOf(t, db, name, 2); got != writes.Load() {
			t.Errorf("the rows hold %d increments, but %d Modify calls succeeded", got, writes.Load())
		}
	})
}

// TestModifyNestedSameRow: fn modifies its own row through a nested
// Modify. The nested call does not wait for the queue its caller holds: it
// writes, the caller conflicts, reads the row again and runs fn again,
// which this time finds the change made. A fn that nests every time ends
// with a conflict when the policy gives up, instead of hanging.
func TestModifyNestedSameRow(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := deadline(t)
		name := rowsTable(t, db, 1)
		tb := newTable(t, db, name)
		calls := 0
		got, st, err := optimistic.ModifyStats(ctx, db.DB, tb, 1, patient, func(it *item) error {
			calls++
			if it.Label != "touched" {
				if _, err := optimistic.Modify(ctx, db.DB, tb, 1, patient, func(it *item) error {
					it.Label = "touched"
					return nil
				}); err != nil {
					return err
				}
			}
			it.Qty++
			return nil
		})
		if err != nil || got.Label != "touched" || got.Qty != 1 || got.Version != 3 || calls != 2 || st.Conflicts != 1 {
			t.Fatalf("Modify nesting a Modify of its row = %+v, %+v, %v after %d calls; want label touched, qty 1, version 3 after 2 calls and 1 conflict", got, st, err, calls)
		}

		nested := 0
		_, err = optimistic.Modify(ctx, db.DB, tb, 1, optimistic.LimitAttempts(optimistic.NoRetry(), 1), func(it *item) error {
			_, err := optimistic.Modify(ctx, db.DB, tb, 1, nil, func(it *item) error {
				nested++
				it.Qty += 10
				return nil
			})
			return err
		})
		if !errors.Is(err, sqllock.ErrConflict) || nested != 1 {
			t.Fatalf("Modify whose fn always rewrites its row = %v after %d nested writes, want ErrConflict after 1", err, nested)
		}
		if q := qtyOf(t, db, name, 1); q != 11 {
			t.Errorf("qty %d, want 11: the nested write alone", q)
		}
	})
}
