package rowlock_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// Sell one unit of an item: the stock row is written in the transaction
// that holds the key, so the sale and the release commit together.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@db.internal/shop")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(11) // at most 10 leases held at once, plus one
	if err := migrations.Up(ctx, db, sqllock.Postgres); err != nil {
		log.Fatal(err)
	}
	locker, err := rowlock.New(db, sqllock.Postgres)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = sqllock.Do(ctx, locker, "stock/sku-42", func(ctx context.Context) error {
		tx, _ := rowlock.TxFrom(ctx)
		_, err := tx.ExecContext(ctx, "UPDATE stock SET qty = qty - 1 WHERE sku = $1 AND qty > 0", "sku-42")
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Lock several application rows at once, in an order every transaction
// shares, so that overlapping baskets never deadlock.
func ExampleLockRows() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@db.internal/shop")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	basket := []string{"sku-9", "sku-1", "sku-42"}
	n, err := rowlock.LockRows(ctx, tx, sqllock.Postgres, "stock", "sku", basket...)
	if err != nil {
		log.Fatal(err)
	}
	if n != len(basket) {
		log.Fatalf("%d of %d items exist", n, len(basket))
	}
	// ... update each item's row, in any order ...
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}

// SQLite has no row locks: New says so and names the alternative.
func ExampleNew_sqlite() {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	_, err = rowlock.New(db, sqllock.SQLite)
	fmt.Println(err)
	// Output: rowlock: unsupported: SQLite has no SELECT ... FOR UPDATE row locks; use tablelock
}
