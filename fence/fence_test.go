package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/tablelock"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newFence(t testing.TB, d sqllock.Dialect, opts ...fence.Option) *fence.Fence {
	t.Helper()
	f, err := fence.New(d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// ph returns the n-th placeholder for d.
func ph(d sqllock.Dialect, n int) string {
	if d == sqllock.Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// resourceTable creates an application table with one row (id 1, v 0),
// dropped when the test ends.
func resourceTable(t *testing.T, db *testdb.DB) string {
	t.Helper()
	name := fmt.Sprintf("fence_res_%d", rand.Uint32())
	if _, err := db.Exec("CREATE TABLE " + name + " (id INTEGER PRIMARY KEY, v BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + name) })
	if _, err := db.Exec("INSERT INTO " + name + " (id, v) VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	return name
}

func last(t testing.TB, ctx context.Context, f *fence.Fence, q sqllock.Querier, resource string) int64 {
	t.Helper()
	n, err := f.Last(ctx, q, resource)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSchemaMatchesMigration keeps Schema and the shipped migration in step.
func TestSchemaMatchesMigration(t *testing.T) {
	for _, d := range testdb.Dialects {
		dir, err := migrations.Dir(d)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fs.ReadFile(migrations.FS, dir+"/00005_fence.sql")
		if err != nil {
			t.Fatal(err)
		}
		ddl, err := fence.Schema(d, fence.DefaultTable)
		if err != nil {
			t.Fatal(err)
		}
		ddl = strings.NewReplacer(`"`+fence.DefaultTable+`"`, fence.DefaultTable, "`"+fence.DefaultTable+"`", fence.DefaultTable).Replace(ddl)
		if !strings.Contains(string(b), ddl) {
			t.Errorf("%v: migration does not contain Schema's DDL:\n%s", d, ddl)
		}
		if !strings.Contains(string(b), "-- +goose Down\nDROP TABLE "+fence.DefaultTable+";") {
			t.Errorf("%v: migration has no Down that drops the table", d)
		}
	}
}

// Table names are validated and never reach SQL unquoted.
func TestBadTableRefused(t *testing.T) {
	for _, name := range []string{"", "bad name", `x"; DROP TABLE y; --`, "x`y", "a.b.c", "1abc", "t;", strings.Repeat("t", 64)} {
		for _, d := range testdb.Dialects {
			if f, err := fence.New(d, fence.WithTable(name)); !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Errorf("%v: New(WithTable(%q)) = %v, %v; want ErrInvalidOption", d, name, f, err)
			}
			if _, err := fence.Schema(d, name); !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Errorf("%v: Schema(%q) = %v; want ErrInvalidOption", d, name, err)
			}
		}
	}
	if _, err := fence.New(sqllock.Dialect(0)); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Errorf("New with no dialect = %v, want ErrInvalidOption", err)
	}
	for _, name := range []string{"my_fence", "app.my_fence", fence.DefaultTable} {
		if f, err := fence.New(sqllock.Postgres, fence.WithTable(name)); err != nil || f.Table() != name {
			t.Errorf("New(WithTable(%q)) = %v, %v", name, f, err)
		}
	}
}

// The first write creates the row; an equal token passes (a holder writes
// many times under one lease); a smaller one is refused, naming both
// tokens; a larger one passes.
func TestCheck(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, f, res := ctxT(t), newFence(t, db.Dialect), locktest.Key(t)
		if got := last(t, ctx, f, db, res); got != 0 {
			t.Fatalf("Last of a new resource = %d, want 0", got)
		}
		step := func(token int64, wantStale bool) {
			t.Helper()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = f.Check(ctx, tx, res, token)
			if wantStale {
				_ = tx.Rollback()
				if !errors.Is(err, sqllock.ErrStaleToken) {
					t.Fatalf("Check(%d) = %v, want ErrStaleToken", token, err)
				}
				return
			}
			if err != nil {
				_ = tx.Rollback()
				t.Fatalf("Check(%d) = %v, want nil", token, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		step(5, false)
		var rows int
		q := "SELECT count(*) FROM " + fence.DefaultTable + " WHERE resource = " + ph(db.Dialect, 1)
		if err := db.QueryRowContext(ctx, q, res).Scan(&rows); err != nil || rows != 1 {
			t.Fatalf("fence rows for the resource after the first write: %d, %v; want 1", rows, err)
		}
		step(5, false) // equal: the same holder writing again
		step(4, true)
		step(1, true)
		step(9, false)
		step(9, false)
		step(8, true)
		if got := last(t, ctx, f, db, res); got != 9 {
			t.Fatalf("Last = %d, want 9", got)
		}
		// The refusal says which resource and both tokens.
		err := f.Check(ctx, db, res, 3)
		if !errors.Is(err, sqllock.ErrStaleToken) || !strings.Contains(err.Error(), res) ||
			!strings.Contains(err.Error(), "token 3") || !strings.Contains(err.Error(), "9") {
			t.Fatalf("stale Check = %v; want ErrStaleToken naming %q, token 3 and 9", err, res)
		}
		// Resources are independent.
		other := res + "/other"
		if err := f.Check(ctx, db, other, 1); err != nil {
			t.Fatalf("another resource refused token 1: %v", err)
		}
	})
}

// The check belongs to the caller's transaction: it rolls back with it.
func TestCheckRollsBackWithTx(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, f, res := ctxT(t), newFence(t, db.Dialect), locktest.Key(t)
		table := resourceTable(t, db)
		if err := f.Check(ctx, db, res, 10); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Check(ctx, tx, res, 20); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = 20 WHERE id = 1"); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if got := last(t, ctx, f, tx, res); got != 20 {
			t.Errorf("Last inside the transaction = %d, want 20", got)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := last(t, ctx, f, db, res); got != 10 {
			t.Fatalf("Last after rollback = %d, want 10", got)
		}
		var v int64
		if err := db.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil || v != 0 {
			t.Fatalf("resource after rollback = %d, %v; want 0", v, err)
		}
		// A token between the two passes: the rolled-back 20 never counted.
		if err := f.Check(ctx, db, res, 15); err != nil {
			t.Fatalf("Check(15) after the rolled-back 20: %v", err)
		}

		// A first check rolled back leaves no row behind.
		fresh := res + "/fresh"
		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Check(ctx, tx, fresh, 30); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := last(t, ctx, f, db, fresh); got != 0 {
			t.Fatalf("Last after a rolled-back first check = %d, want 0", got)
		}
	})
}

func TestBadInputRefused(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, f := ctxT(t), newFence(t, db.Dialect)
		for _, res := range []string{"", strings.Repeat("r", sqllock.MaxKeyLen+1), "bad\xff", "nul\x00"} {
			if err := f.Check(ctx, db, res, 1); !errors.Is(err, sqllock.ErrInvalidKey) {
				t.Errorf("Check(%.20q) = %v, want ErrInvalidKey", res, err)
			}
			if _, err := f.Last(ctx, db, res); !errors.Is(err, sqllock.ErrInvalidKey) {
				t.Errorf("Last(%.20q) = %v, want ErrInvalidKey", res, err)
			}
		}
		res := locktest.Key(t)
		for _, token := range []int64{0, -1} {
			if err := f.Check(ctx, db, res, token); !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Errorf("Check(token %d) = %v, want ErrInvalidOption", token, err)
			}
		}
		if err := f.Check(ctx, nil, res, 1); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("Check(nil Querier) = %v, want ErrInvalidOption", err)
		}
		if err := f.Write(ctx, nil, res, nil); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("Write(nil db) = %v, want ErrInvalidOption", err)
		}
		if got := last(t, ctx, f, db, res); got != 0 {
			t.Errorf("refused checks recorded token %d", got)
		}
	})
}

// A fence table of the caller's own naming, created with CreateTable.
func TestCustomTable(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := fmt.Sprintf("fence_custom_%d", rand.Uint32())
		if err := fence.CreateTable(ctx, db.DB, db.Dialect, table); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
		f := newFence(t, db.Dialect, fence.WithTable(table))
		res := locktest.Key(t)
		if err := f.Check(ctx, db, res, 7); err != nil {
			t.Fatal(err)
		}
		if err := f.Check(ctx, db, res, 6); !errors.Is(err, sqllock.ErrStaleToken) {
			t.Fatalf("Check(6) after 7 = %v, want ErrStaleToken", err)
		}
		// The shared table saw nothing.
		if got := last(t, ctx, newFence(t, db.Dialect), db, res); got != 0 {
			t.Fatalf("default table has token %d for a custom-table resource", got)
		}
		if err := fence.CreateTable(ctx, db.DB, db.Dialect, "no such; thing"); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Fatalf("CreateTable with a bad name = %v", err)
		}
	})
}

// Writers race with distinct tokens, each checking the fence and then
// writing its token into the resource in one transaction. Each writer's
// tokens grow, shuffled between writers round by round, so admitted and
// stale writes interleave. Every write the fence admits finds the resource
// below its token (the fence applies them in token order), and the largest
// token ends up recorded and written.
func TestConcurrentChecks(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, f, res := ctxT(t), newFence(t, db.Dialect), locktest.Key(t)
		table := resourceTable(t, db)
		const writers, each = 16, 8
		tokens := make([]int, 0, writers*each) // round i: i*writers+1 .. (i+1)*writers, shuffled
		for i := range each {
			for _, p := range rand.Perm(writers) {
				tokens = append(tokens, i*writers+p)
			}
		}
		var accepted, refused, retried atomic.Int32
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					token := int64(tokens[i*writers+w] + 1)
					err := writeOnce(ctx, db, f, table, res, token)
					for attempt := 0; err != nil && dberr.IsRetryable(err) && attempt < 20; attempt++ {
						retried.Add(1)
						err = writeOnce(ctx, db, f, table, res, token)
					}
					switch {
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, sqllock.ErrStaleToken):
						refused.Add(1)
					default:
						t.Errorf("token %d: %v", token, err)
						return
					}
				}
			})
		}
		wg.Wait()
		max := int64(writers * each)
		if got := last(t, ctx, f, db, res); got != max {
			t.Errorf("Last = %d, want the largest token %d", got, max)
		}
		var v int64
		if err := db.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil || v != max {
			t.Errorf("resource = %d, %v; want %d", v, err, max)
		}
		if accepted.Load() == 0 || accepted.Load()+refused.Load() != writers*each {
			t.Errorf("%d accepted, %d refused of %d", accepted.Load(), refused.Load(), writers*each)
		}
		t.Logf("%d writes admitted, %d refused as stale, %d transient failures retried", accepted.Load(), refused.Load(), retried.Load())
	})
}

// writeOnce is one fenced write: check, then write token into the resource,
// which must be below it if the fence did its work.
func writeOnce(ctx context.Context, db *testdb.DB, f *fence.Fence, table, res string, token int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f.Check(ctx, tx, res, token); err != nil {
		return err
	}
	r, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = "+ph(db.Dialect, 1)+" WHERE id = 1 AND v < "+ph(db.Dialect, 2), token, token)
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("the fence admitted token %d after a larger one was written (%d rows, %v)", token, n, err)
	}
	return tx.Commit()
}

// Guard takes the token from the lease Do put in the context, and refuses
// an ended lease without asking the database.
func TestGuard(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, f, key := ctxT(t), newFence(t, db.Dialect), locktest.Key(t)
		table := resourceTable(t, db)
		l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(600*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()

		if err := f.Guard(ctx, db, key); !errors.Is(err, sqllock.ErrNotHeld) {
			t.Fatalf("Guard outside Do = %v, want ErrNotHeld", err)
		}
		var token int64
		err = sqllock.Do(ctx, l, key, func(ctx context.Context) error {
			token, _ = sqllock.TokenFrom(ctx)
			return f.Write(ctx, db.DB, key, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = "+ph(db.Dialect, 1)+" WHERE id = 1", token)
				return err
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := last(t, ctx, f, db, key); got != token || token <= 0 {
			t.Fatalf("Last after Write in Do = %d, want the lease's token %d", got, token)
		}
		var v int64
		if err := db.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil || v != token {
			t.Fatalf("resource = %d, %v; want %d", v, err, token)
		}

		// The lease is lost inside Do: Guard refuses with the loss, and
		// Write neither checks nor runs its function, even on a context that
		// is no longer cancelled.
		err = sqllock.Do(ctx, l, key, func(ctx context.Context) error {
			token, _ := sqllock.TokenFrom(ctx)
			if _, err := l.ForceRelease(ctx, key, token); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				return errors.New("the loss was not noticed")
			}
			if err := f.Guard(ctx, db, key); !errors.Is(err, sqllock.ErrLockLost) {
				t.Errorf("Guard after the loss = %v, want ErrLockLost", err)
			}
			ran := false
			err := f.Write(context.WithoutCancel(ctx), db.DB, key, func(*sql.Tx) error { ran = true; return nil })
			if !errors.Is(err, sqllock.ErrLockLost) || ran {
				t.Errorf("Write after the loss = %v (fn ran: %v), want ErrLockLost and no run", err, ran)
			}
			return nil
		})
		if !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("Do = %v, want ErrLockLost", err)
		}
		if got := last(t, ctx, f, db, key); got != token {
			t.Fatalf("Last after the refused writes = %d, want %d", got, token)
		}

		// Under DoAll the context carries the MultiLease: its token, the
		// largest of the keys', is the one checked.
		multi := key + "/multi"
		var want int64
		err = sqllock.DoAll(ctx, l, []string{key + "/b", key + "/a"}, func(ctx context.Context) error {
			lease, _ := sqllock.LeaseFrom(ctx)
			m := lease.(*sqllock.MultiLease)
			a, _ := m.Part(key + "/a")
			b, _ := m.Part(key + "/b")
			if want = m.Token(); want != max(a.Token(), b.Token()) {
				return fmt.Errorf("MultiLease token %d, parts %d and %d", want, a.Token(), b.Token())
			}
			return f.Guard(ctx, db, multi)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := last(t, ctx, f, db, multi); got != want {
			t.Fatalf("Last after Guard in DoAll = %d, want %d", got, want)
		}
	})
}

// querier has only the methods of sqllock.Querier: what a wrapper around
// a transaction (a tracing or retrying one) typically offers.
type querier struct{ sqllock.Querier }

// The fence takes the module's one handle vocabulary, sqllock.Querier:
// Check, Guard and Last need nothing beyond ExecContext and QueryContext.
func TestRootQuerier(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, f, res := ctxT(t), newFence(t, db.Dialect), locktest.Key(t)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		q := querier{tx}
		if err := f.Check(ctx, q, res, 5); err != nil {
			t.Fatal(err)
		}
		if err := f.Check(ctx, q, res, 4); !errors.Is(err, sqllock.ErrStaleToken) || !strings.Contains(err.Error(), "older than 5") {
			t.Fatalf("Check(4) after 5 = %v, want ErrStaleToken naming 5", err)
		}
		if got := last(t, ctx, f, q, res); got != 5 {
			t.Fatalf("Last = %d, want 5", got)
		}
		if got := last(t, ctx, f, q, res+"/none"); got != 0 {
			t.Fatalf("Last of an unchecked resource = %d, want 0", got)
		}
		if err := f.Guard(ctx, q, res); !errors.Is(err, sqllock.ErrNotHeld) {
			t.Fatalf("Guard outside Do = %v, want ErrNotHeld", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestResourcesCompareBytes: resources that differ only in case or
// trailing space are fenced apart, in the shipped table and in one made by
// CreateTable: a token applied to one never refuses a write to the other.
func TestResourcesCompareBytes(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		custom := fmt.Sprintf("fence_ident_%d", rand.Uint32())
		if err := fence.CreateTable(ctx, db.DB, db.Dialect, custom); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Exec("DROP TABLE " + custom) })
		for _, table := range []string{fence.DefaultTable, custom} {
			f := newFence(t, db.Dialect, fence.WithTable(table))
			base := locktest.Key(t)
			for _, pair := range [][2]string{{"Invoice-7", "invoice-7"}, {"invoice-7", "invoice-7 "}} {
				a, b := base+"/"+pair[0], base+"/"+pair[1]
				if err := f.Check(ctx, db, a, 100); err != nil {
					t.Fatal(err)
				}
				if err := f.Check(ctx, db, b, 1); err != nil {
					t.Errorf("%s: token 1 for %q refused after token 100 for %q: %v", table, b, a, err)
				}
				if got := last(t, ctx, f, db, b); got != 1 {
					t.Errorf("%s: Last(%q) = %d, want 1", table, b, got)
				}
			}
		}
	})
}
