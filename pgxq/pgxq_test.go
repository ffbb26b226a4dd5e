package pgxq_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/pgxq"
	"github.com/sqllock/sqllock/rowlock"
)

func setup(t *testing.T) (context.Context, *pgxpool.Pool, *testdb.DB) {
	t.Helper()
	db := testdb.Open(t, sqllock.Postgres)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return ctx, pool, db
}

// stock creates an application table of three items.
func stock(t *testing.T, ctx context.Context, pool *pgxpool.Pool) string {
	t.Helper()
	table := fmt.Sprintf("pgxq_stock_%d", rand.Uint32())
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (sku text PRIMARY KEY, qty int NOT NULL); INSERT INTO "+table+" VALUES ('a', 5), ('b', 5), ('c', 5)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP TABLE "+table) })
	return table
}

// The fence inside a pgx transaction: the check and the pgx write commit
// together; an older token is refused, and its rollback undoes the check.
func TestFenceInPgxTx(t *testing.T) {
	ctx, pool, _ := setup(t)
	f, err := fence.New(sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	resource := locktest.Key(t)
	write := func(token int64) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			q := pgxq.New(tx)
			defer q.Close()
			return f.Check(ctx, q, resource, token)
		})
	}
	if err := write(10); err != nil {
		t.Fatal(err)
	}
	if err := write(9); !errors.Is(err, sqllock.ErrStaleToken) {
		t.Fatalf("older token: %v, want ErrStaleToken", err)
	}
	// A check rolled back with its transaction leaves the fence as it was.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q := pgxq.New(tx)
	if err := f.Check(ctx, q, resource, 20); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	q = pgxq.New(pool)
	defer q.Close()
	if last, err := f.Last(ctx, q, resource); err != nil || last != 10 {
		t.Fatalf("Last = %d, %v; want 10", last, err)
	}
}

// LockRows and Token in a pgx transaction: the multi-item order of the
// README, pgx-native.
func TestLockRowsInPgxTx(t *testing.T) {
	ctx, pool, _ := setup(t)
	table := stock(t, ctx, pool)
	var tokens []int64
	for range 2 {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			q := pgxq.New(tx)
			defer q.Close()
			n, err := rowlock.LockRows(ctx, q, sqllock.Postgres, table, "sku", "c", "a")
			if err != nil || n != 2 {
				return fmt.Errorf("LockRows: %d, %w", n, err)
			}
			token, err := rowlock.Token(ctx, q, sqllock.Postgres)
			if err != nil {
				return err
			}
			tokens = append(tokens, token)
			_, err = tx.Exec(ctx, "UPDATE "+table+" SET qty = qty - 1 WHERE sku = ANY($1)", []string{"a", "c"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if tokens[1] <= tokens[0] {
		t.Errorf("tokens %v do not increase", tokens)
	}
	var qa, qc int
	if err := pool.QueryRow(ctx, "SELECT (SELECT qty FROM "+table+" WHERE sku = 'a'), (SELECT qty FROM "+table+" WHERE sku = 'c')").Scan(&qa, &qc); err != nil {
		t.Fatal(err)
	}
	if qa != 3 || qc != 3 {
		t.Errorf("qty a %d, c %d; want 3 and 3", qa, qc)
	}
}

// The rows lock: a second pgx transaction locking an overlapping set
// waits for the first.
func TestLockRowsWaits(t *testing.T) {
	ctx, pool, _ := setup(t)
	table := stock(t, ctx, pool)
	tx1, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	q1 := pgxq.New(tx1)
	defer q1.Close()
	if _, err := rowlock.LockRows(ctx, q1, sqllock.Postgres, table, "sku", "b"); err != nil {
		t.Fatal(err)
	}
	tx2, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	q2 := pgxq.New(tx2)
	defer q2.Close()
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := rowlock.LockRows(wctx, q2, sqllock.Postgres, table, "sku", "a", "b"); err == nil {
		t.Fatal("the second transaction locked a row the first holds")
	}
}

// What the adapter refuses, clearly.
func TestAdapterRefuses(t *testing.T) {
	ctx, pool, _ := setup(t)
	q := pgxq.New(pool)
	defer q.Close()
	if _, err := q.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	res, err := q.ExecContext(ctx, "SELECT 1 UNION SELECT 2")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 2 {
		t.Errorf("RowsAffected = %d, want 2", n)
	}
	if _, err := res.LastInsertId(); err == nil {
		t.Error("LastInsertId returned no error")
	}
	if _, err := q.QueryContext(ctx, "SELECT nope"); err == nil {
		t.Error("a bad query returned no error")
	}
}
