package pgxq_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/pgxq"
	"github.com/sqllock/sqllock/tablelock"
)

// A pgx application holds an invoice's key and writes the invoice in its
// own pgx transaction, fenced: the write commits only if no later holder
// of the key has written. The Locker runs on a *sql.DB over the same pool.
// It needs a migrated PostgreSQL (DATABASE_URL), so it is compiled, not
// run, by go test.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := tablelock.New(db, sqllock.Postgres)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	f, err := fence.New(sqllock.Postgres)
	if err != nil {
		log.Fatal(err)
	}

	err = sqllock.Do(ctx, locker, "invoice/42", func(ctx context.Context) error {
		tx, err := pool.Begin(ctx) // a pgx.Tx
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		q := pgxq.New(tx)
		defer q.Close()
		// Refused (sqllock.ErrStaleToken) if a later holder wrote first.
		if err := f.Guard(ctx, q, "invoice/42"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE invoices SET status = 'sent' WHERE id = 42"); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		log.Fatal(err)
	}
}
