package rowlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// tempTable creates a table named for the test from ddl (with %s for the
// name) and drops it when the test ends.
func tempTable(t testing.TB, db *testdb.DB, ddl func(name string) string) string {
	t.Helper()
	name := fmt.Sprintf("rowlock_t_%x", rand.Uint64())
	if _, err := db.ExecContext(context.Background(), ddl(name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+name) })
	return name
}

// lockTable creates a private lock table with the shipped schema.
func lockTable(t testing.TB, db *testdb.DB) string {
	return tempTable(t, db, func(name string) string {
		ddl, err := rowlock.Schema(db.Dialect, name)
		if err != nil {
			t.Fatal(err)
		}
		return ddl
	})
}

// TestRowLevel: a holder of one key never blocks another key, also when
// neither row existed before (on MariaDB a locking read of a missing row
// under REPEATABLE READ takes a gap lock that would block the other key's
// insert). Each Acquire below would time out if it were blocked.
func TestRowLevel(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := lockTable(t, db) // empty: every key is new, all in one gap
		a, b := newLocker(t, db, rowlock.WithTable(table)), newLocker(t, db, rowlock.WithTable(table))
		held, err := a.Acquire(ctx, "m")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(ctx)
		for _, key := range []string{"a", "l", "ma", "n", "z", "m0"} {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			lease, err := b.Acquire(c, key)
			cancel()
			if err != nil {
				t.Fatalf("Acquire(%q) while %q is held: %v", key, "m", err)
			}
			lease2, err := a.TryAcquire(ctx, key+"-try")
			if err != nil {
				t.Fatalf("TryAcquire(%q) while %q is held: %v", key+"-try", "m", err)
			}
			// Both stay held while the next keys are taken.
			defer lease.Release(ctx)
			defer lease2.Release(ctx)
		}
		if _, err := b.TryAcquire(ctx, "m"); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of the held key = %v, want ErrNotAcquired", err)
		}
	})
}

// TestGapLockControl shows the hazard TestRowLevel guards against is real:
// a plain REPEATABLE READ locking read of a missing key on MariaDB blocks
// another key's insert into the same gap.
func TestGapLockControl(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	ctx := ctxT(t)
	table := lockTable(t, db)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT 1 FROM "+table+" WHERE lock_key = 'm' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, "SET STATEMENT innodb_lock_wait_timeout = 1 FOR INSERT INTO "+table+" (lock_key) VALUES ('n')")
	if !dberr.IsLockNotAvailable(err) {
		t.Fatalf("insert of another key beside a gap-locked missing row = %v, want a lock wait timeout", err)
	}
}

// TestFencingAfterWait: a waiter's token is drawn after the lock is granted,
// so it is larger than any token drawn while it waited.
func TestFencingAfterWait(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx, key := ctxT(t), locktest.Key(t)
		a, b := newLocker(t, db), newLocker(t, db)
		first, err := a.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan sqllock.Lease, 1)
		go func() {
			lease, err := b.Acquire(ctx, key)
			if err != nil {
				t.Error(err)
			}
			got <- lease
		}()
		waitForWaiter(t, db, rowlock.DefaultTable)
		q := map[sqllock.Dialect]string{sqllock.Postgres: "SELECT sqllock_next_token()", sqllock.MariaDB: "SELECT NEXTVAL(sqllock_fence_seq)"}[db.Dialect]
		var mid int64
		if err := db.QueryRowContext(ctx, q).Scan(&mid); err != nil {
			t.Fatal(err)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		second := <-got
		if second == nil {
			return
		}
		defer second.Release(ctx)
		if second.Token() <= mid {
			t.Fatalf("waiter's token %d not above %d, drawn while it waited: it was drawn before the lock", second.Token(), mid)
		}
	})
}

// waiting returns the server sessions blocked on a row lock in a statement
// that names table.
func waiting(t testing.TB, db *testdb.DB, table string) int {
	return waitingFor(t, db, table, 0)
}

// waitingFor counts the statements waiting on table; on MariaDB only those
// that have run for at least age.
func waitingFor(t testing.TB, db *testdb.DB, table string, age time.Duration) int {
	t.Helper()
	var q string
	if db.Dialect == sqllock.Postgres {
		q = `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%` + table + `%' AND pid <> pg_backend_pid()`
	} else {
		// A locking read of the table that can wait: a statement that
		// merely names it, or a NOWAIT try, may be one an Acquire runs
		// before it waits. MariaDB shows no lock wait of a prepared
		// statement in INNODB_TRX; only the statement's age tells a wait
		// from a locking read finishing after its rows were sent.
		q = fmt.Sprintf(`SELECT count(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%%%s%%'
			AND (INFO LIKE '%%FOR UPDATE%%' OR INFO LIKE '%%SHARE%%') AND INFO NOT LIKE '%%NOWAIT%%'
			AND ID <> CONNECTION_ID() AND COMMAND <> 'Sleep' AND TIME_MS >= %d`, table, age.Milliseconds())
	}
	var n int
	if err := db.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitForWaiter returns once a statement has waited on table for 100ms.
func waitForWaiter(t testing.TB, db *testdb.DB, table string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for waitingFor(t, db, table, 100*time.Millisecond) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no waiter appeared on the server within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCancelStopsServerWait: a cancelled Acquire leaves no statement
// waiting on the server (the drivers only close their socket, which a
// session blocked on a row lock does not notice) and no connection in use.
func TestCancelStopsServerWait(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := lockTable(t, db)
		pool := testdb.Fresh(t, db.Dialect, 0)
		l := newLocker(t, pool, rowlock.WithTable(table))
		held, err := newLocker(t, db, rowlock.WithTable(table)).Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(ctx)
		for range 3 {
			c, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() {
				_, err := l.Acquire(c, "k")
				errc <- err
			}()
			waitForWaiter(t, db, table)
			cancel()
			if err := <-errc; !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Acquire = %v", err)
			}
			deadline := time.Now().Add(3 * time.Second)
			for waiting(t, db, table) > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("a waiting statement on %s outlived its cancelled Acquire by 3s", table)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		// The kill of a cancelled MariaDB wait borrows a connection briefly.
		deadline := time.Now().Add(5 * time.Second)
		for pool.Stats().InUse > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections in use 5s after cancelled Acquires", pool.Stats().InUse)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestDriverCancel records what each driver does by itself when the
// context of a waiting locking read ends. go-sql-driver/mysql only closes
// its socket and the server keeps the statement waiting: rowlock kills it.
// pgx also sends a cancel request, which rowlock relies on; if a pgx
// upgrade stopped doing so, this test says so first.
func TestDriverCancel(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := lockTable(t, db)
		l := newLocker(t, db, rowlock.WithTable(table))
		// Take the key twice so the row is committed: a plain locking read
		// does not see (and so does not wait for) an uncommitted insert.
		for range 2 {
			held, err := l.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(ctx)
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		held, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(ctx)
		ph := map[sqllock.Dialect]string{sqllock.Postgres: "$1", sqllock.MariaDB: "?"}[db.Dialect]
		c, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			tx, err := db.BeginTx(context.Background(), nil)
			if err == nil {
				_, err = tx.ExecContext(c, "SELECT 1 FROM "+table+" WHERE lock_key = "+ph+" FOR UPDATE", "k")
				tx.Rollback()
			}
			errc <- err
		}()
		waitForWaiter(t, db, table)
		cancel()
		<-errc
		time.Sleep(300 * time.Millisecond)
		n := waiting(t, db, table)
		t.Logf("%v: %d raw statement(s) still waiting on the server 300ms after their context was cancelled", db.Dialect, n)
		if db.Dialect == sqllock.Postgres && n != 0 {
			t.Fatal("pgx no longer cancels a waiting query on the server: rowlock must send the cancel itself")
		}
		if db.Dialect.IsMySQL() && n == 0 {
			t.Fatal("the MySQL driver alone stopped the server-side wait: rowlock's KILL QUERY may be redundant")
		}
		// Clean up the orphan.
		kill := map[sqllock.Dialect]string{
			sqllock.Postgres: `SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%` + table + `%' AND pid <> pg_backend_pid()`,
		}[db.Dialect]
		if kill != "" {
			_, _ = db.ExecContext(ctx, kill)
		} else {
			rows, err := db.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%`+table+`%' AND ID <> CONNECTION_ID()`)
			if err == nil {
				var ids []int64
				for rows.Next() {
					var id int64
					_ = rows.Scan(&id)
					ids = append(ids, id)
				}
				rows.Close()
				for _, id := range ids {
					_, _ = db.ExecContext(ctx, "KILL QUERY "+itoa(id))
				}
			}
		}
	})
}

// stockTable creates an application table of n items with a quantity.
func stockTable(t testing.TB, db *testdb.DB, n int) string {
	t.Helper()
	name := tempTable(t, db, func(name string) string {
		return "CREATE TABLE " + name + " (id bigint NOT NULL PRIMARY KEY, qty bigint NOT NULL)"
	})
	var b strings.Builder
	b.WriteString("INSERT INTO " + name + " (id, qty) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d, 1000)", i+1)
	}
	if _, err := db.ExecContext(context.Background(), b.String()); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestDeadlockHazard: two transactions that lock the same two rows in
// opposite order with plain SQL deadlock, and the database aborts one.
func TestDeadlockHazard(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := stockTable(t, db, 2)
		ph := map[sqllock.Dialect]string{sqllock.Postgres: "$1", sqllock.MariaDB: "?"}[db.Dialect]
		lock := "SELECT qty FROM " + table + " WHERE id = " + ph + " FOR UPDATE"
		tx1, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx1.Rollback()
		tx2, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx2.Rollback()
		if _, err := tx1.ExecContext(ctx, lock, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := tx2.ExecContext(ctx, lock, 2); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		go func() {
			_, err := tx1.ExecContext(ctx, lock, 2)
			if err != nil {
				tx1.Rollback() // the victim's locks go, so the other proceeds
			}
			errs <- err
		}()
		go func() {
			_, err := tx2.ExecContext(ctx, lock, 1)
			if err != nil {
				tx2.Rollback()
			}
			errs <- err
		}()
		deadlocks := 0
		for range 2 {
			if err := <-errs; dberr.IsDeadlock(err) {
				deadlocks++
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
		}
		if deadlocks != 1 {
			t.Fatalf("%d deadlock errors, want 1", deadlocks)
		}
	})
}

// TestLockRowsNoDeadlock: many transactions lock random overlapping sets of
// rows with LockRows and move stock between them; none is ever chosen as a
// deadlock victim, and the total is conserved.
func TestLockRowsNoDeadlock(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		const items, workers, rounds = 6, 8, 25
		table := stockTable(t, db, items)
		ph := func(i int) string {
			if db.Dialect == sqllock.Postgres {
				return fmt.Sprintf("$%d", i)
			}
			return "?"
		}
		move := "UPDATE " + table + " SET qty = qty + " + ph(1) + " WHERE id = " + ph(2)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range rounds {
					// Random set, given in random order: LockRows sorts.
					ids := rand.Perm(items)[:2+rand.IntN(items-1)]
					keys := make([]int64, len(ids))
					for i, id := range ids {
						keys[i] = int64(id + 1)
					}
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						t.Error(err)
						return
					}
					n, err := rowlock.LockRows(ctx, tx, db.Dialect, table, "id", keys...)
					if err != nil {
						tx.Rollback()
						t.Errorf("LockRows(%v): %v (deadlock: %v)", keys, err, dberr.IsDeadlock(err))
						return
					}
					if n != len(keys) {
						t.Errorf("LockRows locked %d rows of %d", n, len(keys))
					}
					// Move one unit from the first to each other, one by one,
					// in the caller's (unsorted) order: safe, all are held.
					for _, k := range keys[1:] {
						_, err := tx.ExecContext(ctx, move, -1, keys[0])
						if err == nil {
							_, err = tx.ExecContext(ctx, move, 1, k)
						}
						if err != nil {
							tx.Rollback()
							t.Errorf("update: %v", err)
							return
						}
					}
					if err := tx.Commit(); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		var total int64
		if err := db.QueryRowContext(ctx, "SELECT SUM(qty) FROM "+table).Scan(&total); err != nil {
			t.Fatal(err)
		}
		if total != items*1000 {
			t.Fatalf("total stock %d, want %d", total, items*1000)
		}
	})
}

func TestLockRowsInvalid(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx := ctxT(t)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, c := range []struct{ table, col string }{
		{"stock; DROP TABLE x", "id"}, {"stock", "id = 1 OR 1"}, {"", "id"}, {"a.b.c", "id"},
	} {
		if _, err := rowlock.LockRows(ctx, tx, db.Dialect, c.table, c.col, 1); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("LockRows(%q, %q) = %v, want ErrInvalidOption", c.table, c.col, err)
		}
	}
	if n, err := rowlock.LockRows[int](ctx, tx, db.Dialect, "stock", "id"); n != 0 || err != nil {
		t.Errorf("LockRows with no keys = %d, %v; want 0, nil", n, err)
	}
}

// TestPoolExhaustion: with a pool of N connections and N leases held, the
// next Acquire waits on its context and says why, instead of hanging; a
// release lets it through.
func TestPoolExhaustion(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		const n = 3
		ctx := ctxT(t)
		pool := testdb.Fresh(t, db.Dialect, n)
		l := newLocker(t, pool)
		var leases []sqllock.Lease
		for range n {
			lease, err := l.Acquire(ctx, locktest.Key(t))
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, lease)
		}
		c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := l.Acquire(c, locktest.Key(t))
		cancel()
		if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with the pool exhausted = %v; want ErrNotAcquired joined with DeadlineExceeded", err)
		}
		if !strings.Contains(err.Error(), "no pooled connection") {
			t.Errorf("error %q does not say it waited for a pooled connection", err)
		}
		got := make(chan error, 1)
		go func() {
			lease, err := l.Acquire(ctx, locktest.Key(t))
			if err == nil {
				err = lease.Release(ctx)
			}
			got <- err
		}()
		if err := leases[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Acquire still blocked 10s after a lease freed a connection")
		}
		for _, lease := range leases[1:] {
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestTxWork: work done in the lease's transaction commits with Release and
// is undone with Rollback; Do hands the transaction to fn through TxFrom.
func TestTxWork(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := stockTable(t, db, 1)
		l := newLocker(t, db)
		set := "UPDATE " + table + " SET qty = 7"
		read := func() (q int64) {
			if err := db.QueryRowContext(ctx, "SELECT qty FROM "+table).Scan(&q); err != nil {
				t.Fatal(err)
			}
			return q
		}
		lease, err := l.Acquire(ctx, locktest.Key(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lease.(*rowlock.Lease).Tx().ExecContext(ctx, set); err != nil {
			t.Fatal(err)
		}
		if err := lease.(*rowlock.Lease).Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if q := read(); q != 1000 {
			t.Fatalf("qty after Rollback = %d, want 1000", q)
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrReleased) {
			t.Fatalf("Release after Rollback = %v, want ErrReleased", err)
		}
		err = sqllock.Do(ctx, l, locktest.Key(t), func(ctx context.Context) error {
			tx, ok := rowlock.TxFrom(ctx)
			if !ok {
				return errors.New("no transaction in Do's context")
			}
			_, err := tx.ExecContext(ctx, set)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if q := read(); q != 7 {
			t.Fatalf("qty after Do = %d, want 7", q)
		}
	})
}

// TestTxEndedOutside: a holder that commits Tx itself frees the key behind
// the lease's back; the lease notices and Release says so.
func TestTxEndedOutside(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		l := newLocker(t, db, rowlock.WithCheckInterval(50*time.Millisecond))
		lease, err := l.Acquire(ctx, locktest.Key(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.(*rowlock.Lease).Tx().Commit(); err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Release after an outside commit = %v, want ErrLockLost", err)
		}
	})
}

func TestOptions(t *testing.T) {
	db := &sql.DB{} // New does not touch the database
	for name, c := range map[string]struct {
		d    sqllock.Dialect
		opts []rowlock.Option
		want error
	}{
		"nil logger":     {sqllock.Postgres, []rowlock.Option{rowlock.WithLogger(nil)}, sqllock.ErrInvalidOption},
		"short interval": {sqllock.Postgres, []rowlock.Option{rowlock.WithCheckInterval(time.Millisecond)}, sqllock.ErrInvalidOption},
		"bad table":      {sqllock.MariaDB, []rowlock.Option{rowlock.WithTable("x`; DROP")}, sqllock.ErrInvalidOption},
		"bad dialect":    {sqllock.Dialect(9), nil, sqllock.ErrInvalidOption},
		"sqlite":         {sqllock.SQLite, nil, sqllock.ErrUnsupported},
		"ok":             {sqllock.MariaDB, []rowlock.Option{rowlock.WithTable("app.locks"), rowlock.WithCheckInterval(time.Second)}, nil},
	} {
		l, err := rowlock.New(db, c.d, c.opts...)
		if !errors.Is(err, c.want) || (c.want == nil) != (l != nil) {
			t.Errorf("%s: New = %v, %v; want %v", name, l, err, c.want)
		}
	}
	if _, err := rowlock.New(nil, sqllock.Postgres); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Errorf("New(nil) = %v, want ErrInvalidOption", err)
	}
}
