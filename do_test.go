package sqllock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// A function cancelled by the loss of its lease usually returns what its
// last database call said: "context canceled". Do's error must lead with
// the loss, which is why the context ended, and still match both.
func TestDoReportsTheLossFirst(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxFor(t)
		key := locktest.Key(t)
		l := newTableLocker(t, db, tablelock.WithTTL(300*time.Millisecond))
		err := sqllock.Do(ctx, l, key, func(ctx context.Context) error {
			token, _ := sqllock.TokenFrom(ctx)
			if _, err := l.ForceRelease(ctx, key, token); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		})
		t.Logf("Do: %v", err)
		if !errors.Is(err, sqllock.ErrLockLost) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Do: %v, want an error matching ErrLockLost and context.Canceled", err)
		}
		if first, _, _ := strings.Cut(err.Error(), "\n"); !strings.Contains(first, sqllock.ErrLockLost.Error()) {
			t.Errorf("Do's message starts with %q, want the loss first", first)
		}
	})
}

// namedSet is a caller's own lease type around a MultiLease: here one that
// names the order whose items it holds.
type namedSet struct {
	*sqllock.MultiLease
	order string
}

// DoLease ends a failed fn's lease by rolling back the transaction that
// holds its keys (rowlock's set), also when the MultiLease comes inside a
// type of the caller's: the work of a failed fn is never committed.
func TestDoLeaseRollsBackAWrappedMultiLease(t *testing.T) {
	for _, d := range servers {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Open(t, d)
			ctx := ctxFor(t)
			l, err := rowlock.New(db.DB, db.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			table := fmt.Sprintf("sqllock_do_rollback_%d", rand.Uint32())
			if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id bigint NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
			base := locktest.Key(t)
			m, err := sqllock.AcquireAll(ctx, l, base+"/item-1", base+"/item-2")
			if err != nil {
				t.Fatal(err)
			}
			shared, ok := m.Shared()
			if !ok {
				t.Fatal("rowlock's set is not one lease")
			}
			tx := shared.(*rowlock.Lease).Tx()
			err = sqllock.DoLease(ctx, namedSet{m, "order 7"}, func(ctx context.Context) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (id) VALUES (7)"); err != nil {
					return err
				}
				return errors.New("item 2 is out of stock")
			})
			if err == nil || !strings.Contains(err.Error(), "out of stock") {
				t.Fatalf("DoLease = %v, want fn's error", err)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d rows written by the failed fn were kept: the set's transaction was committed, not rolled back", n)
			}
			if err := m.Err(); !errors.Is(err, sqllock.ErrReleased) {
				t.Errorf("the MultiLease after DoLease: Err() = %v, want ErrReleased", err)
			}
		})
	}
}
