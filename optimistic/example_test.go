package optimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/optimistic"
)

// openExampleDB opens a throwaway SQLite database.
func openExampleDB() (*sql.DB, func()) {
	dir, err := os.MkdirTemp("", "optimistic-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

// A stock decrement: read the row, change it, write it back only if nobody
// else did in between, and retry on conflict. "Sold out" is the caller's
// own error and ends the retries at once.
func ExampleModify() {
	db, done := openExampleDB()
	defer done()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE stock (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL, version INTEGER NOT NULL);
		INSERT INTO stock VALUES ('apple', 2, 1)`); err != nil {
		log.Fatal(err)
	}

	type Stock struct {
		SKU     string `db:"sku"`
		Qty     int64  `db:"qty"`
		Version int64  `db:"version"`
	}
	stock, err := optimistic.NewTable(sqllock.SQLite, "stock", "sku", "version")
	if err != nil {
		log.Fatal(err)
	}
	errSoldOut := errors.New("sold out")
	policy := optimistic.LimitAttempts(optimistic.ExponentialBackoff(optimistic.DefaultMinBackoff, optimistic.DefaultMaxBackoff), 10)

	for range 3 {
		s, err := optimistic.Modify(ctx, db, stock, "apple", policy, func(s *Stock) error {
			if s.Qty == 0 {
				return errSoldOut
			}
			s.Qty--
			return nil
		})
		switch {
		case errors.Is(err, errSoldOut):
			fmt.Println("sold out")
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("sold one: %d left, version %d\n", s.Qty, s.Version)
		}
	}
	// Output:
	// sold one: 1 left, version 2
	// sold one: 0 left, version 3
	// sold out
}

// A hot item spread over 4 rows: takers start at a random stripe, so they
// rarely queue on the same row lock.
func ExampleCounter() {
	db, done := openExampleDB()
	defer done()
	ctx := context.Background()
	ddl, err := optimistic.CounterSchema(sqllock.SQLite, "stock_stripes")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		log.Fatal(err)
	}
	c, err := optimistic.NewCounter(db, sqllock.SQLite, "stock_stripes", 4)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "ticket", 6); err != nil { // stripes of 2, 2, 1, 1
		log.Fatal(err)
	}
	sold := 0
	for {
		err := c.Take(ctx, "ticket")
		if errors.Is(err, optimistic.ErrSoldOut) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		sold++
	}
	left, err := c.Total(ctx, "ticket")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sold", sold, "left", left)
	// Output:
	// sold 6 left 0
}

// The Locker detects overlap instead of preventing it: the second Acquire
// succeeds at once, and the first lease finds out at Release.
func ExampleLocker() {
	db, done := openExampleDB()
	defer done()
	ctx := context.Background()
	if err := migrations.Up(ctx, db, sqllock.SQLite); err != nil {
		log.Fatal(err)
	}
	l, err := optimistic.New(db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	first, err := l.Acquire(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	second, err := l.Acquire(ctx, "nightly-report") // never refused
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("newer token:", second.Token() > first.Token())
	fmt.Println("first release lost:", errors.Is(first.Release(ctx), sqllock.ErrLockLost))
	fmt.Println("second release:", second.Release(ctx))
	// Output:
	// newer token: true
	// first release lost: true
	// second release: <nil>
}
