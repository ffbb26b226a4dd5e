package semaphore_test

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
	"github.com/sqllock/sqllock/semaphore"
)

// At most two exports run at once; a third caller is refused until one of
// them releases its permit. On the embedded SQLite; with PostgreSQL or
// MariaDB only the sql.Open line and the dialect change.
func Example() {
	dir, _ := os.MkdirTemp("", "semaphore-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := migrations.Up(ctx, db, sqllock.SQLite); err != nil {
		log.Fatal(err)
	}
	sem, err := semaphore.New(db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer sem.Close()

	a, err := sem.Acquire(ctx, "exports", 2)
	if err != nil {
		log.Fatal(err)
	}
	b, err := sem.Acquire(ctx, "exports", 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two permits held, in different slots:", a.Slot() != b.Slot())
	if _, err := sem.TryAcquire(ctx, "exports", 2); errors.Is(err, sqllock.ErrNotAcquired) {
		fmt.Println("a third is refused")
	}
	if err := a.Release(ctx); err != nil {
		log.Fatal(err)
	}
	c, err := sem.Acquire(ctx, "exports", 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after a release the next caller gets the freed slot:", c.Slot() == a.Slot())
	_ = b.Release(ctx)
	_ = c.Release(ctx)
	// Output:
	// two permits held, in different slots: true
	// a third is refused
	// after a release the next caller gets the freed slot: true
}
