package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func qtys(t *testing.T, db *testdb.DB, table string) string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT qty FROM "+table+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out string
	for rows.Next() {
		var q int64
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		out += fmt.Sprint(q, " ")
	}
	return out
}

// A multi-item order under DoAll: every key is held by one transaction,
// TxFrom finds it, and the order commits as one. A failing order leaves
// nothing behind.
func TestDoAllOneTransaction(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := stockTable(t, db, 3)
		l := newLocker(t, db)
		base := locktest.Key(t)
		keys := []string{base + "/item-3", base + "/item-1", base + "/item-2"}
		order := func(fail bool) error {
			return sqllock.DoAll(ctx, l, keys, func(ctx context.Context) error {
				tx, ok := rowlock.TxFrom(ctx)
				if !ok {
					return errors.New("no transaction in DoAll's context")
				}
				for id := 1; id <= 3; id++ {
					if _, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET qty = qty - %d WHERE id = %d", table, id, id)); err != nil {
						return err
					}
					if fail && id == 2 {
						return errors.New("item 3 is out of stock")
					}
				}
				return nil
			})
		}
		if err := order(false); err != nil {
			t.Fatalf("order: %v", err)
		}
		if got, want := qtys(t, db, table), "999 998 997 "; got != want {
			t.Fatalf("stock after the order: %q, want %q", got, want)
		}
		if err := order(true); err == nil {
			t.Fatal("a failing order returned nil")
		}
		if got, want := qtys(t, db, table), "999 998 997 "; got != want {
			t.Fatalf("stock after a failed order: %q, want %q (nothing of it kept)", got, want)
		}
	})
}

// The set is one lease: one connection, one token for every key, held
// until Release; a second set that overlaps waits, and TryAcquireAll is
// refused naming the key.
func TestAcquireAllSetLease(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		l := newLocker(t, db)
		base := locktest.Key(t)
		m, err := sqllock.AcquireAll(ctx, l, base+"/b", base+"/a")
		if err != nil {
			t.Fatal(err)
		}
		shared, ok := m.Shared()
		if !ok {
			t.Fatal("a rowlock set is not one lease")
		}
		pa, _ := m.Part(base + "/a")
		pb, _ := m.Part(base + "/b")
		if pa != shared || pb != shared || m.Token() != shared.Token() {
			t.Errorf("parts %p %p, token %d; want the one lease %p with token %d", pa, pb, m.Token(), shared, shared.Token())
		}
		if got := shared.(*rowlock.Lease).Keys(); len(got) != 2 || got[0] != base+"/a" {
			t.Errorf("Keys() = %q", got)
		}
		_, err = sqllock.TryAcquireAll(ctx, l, base+"/c", base+"/b")
		if !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Errorf("TryAcquireAll of an overlapping set: %v, want ErrNotAcquired", err)
		}
		// base/c was locked and rolled back with the refusal: it is free.
		c, err := l.TryAcquire(ctx, base+"/c")
		if err != nil {
			t.Fatalf("the refused set kept %q: %v", base+"/c", err)
		}
		c.Release(ctx)
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := sqllock.AcquireAll(wctx, l, base+"/a"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("AcquireAll of a held key: %v, want it to wait", err)
		}
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := sqllock.AcquireAll(ctx, l, base+"/a", base+"/b")
		if err != nil {
			t.Fatal(err)
		}
		if n.Token() <= m.Token() {
			t.Errorf("the next set's token %d is not above %d", n.Token(), m.Token())
		}
		n.Release(ctx)
	})
}

// AcquireSet refuses what AcquireAll would have sorted: the order is what
// keeps sets from deadlocking.
func TestAcquireSetUnsorted(t *testing.T) {
	db := testdb.Open(t, servers[0])
	l := newLocker(t, db)
	for _, keys := range [][]string{{}, {"b", "a"}, {"a", "a"}, {"a", ""}} {
		if _, err := l.AcquireSet(ctxT(t), keys); !errors.Is(err, sqllock.ErrInvalidKey) {
			t.Errorf("AcquireSet(%q): %v, want ErrInvalidKey", keys, err)
		}
	}
}

// Token after LockRows: drawn in the transaction holding the rows, larger
// for the next transaction that locks them.
func TestTokenAfterLockRows(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := stockTable(t, db, 2)
		var last int64
		for range 2 {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := rowlock.LockRows(ctx, tx, db.Dialect, table, "id", 2, 1); err != nil || n != 2 {
				t.Fatalf("LockRows: %d, %v", n, err)
			}
			token, err := rowlock.Token(ctx, tx, db.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			if token <= last {
				t.Errorf("token %d after %d", token, last)
			}
			last = token
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if _, err := rowlock.Token(context.Background(), nil, sqllock.SQLite); !errors.Is(err, sqllock.ErrUnsupported) {
		t.Errorf("Token on SQLite: %v, want ErrUnsupported", err)
	}
	if _, err := rowlock.Token(context.Background(), nil, sqllock.Postgres); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Errorf("Token with a nil tx: %v, want ErrInvalidOption", err)
	}
}
