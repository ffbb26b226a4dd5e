package tablelock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/tablelock"
)

// A billing worker holds an account's key, takes it again as the same
// owner, and other callers are refused until it has released every hold;
// the next holder gets a larger fencing token. On the embedded SQLite; with
// PostgreSQL or MariaDB only the sql.Open line and the dialect change.
func Example() {
	dir, _ := os.MkdirTemp("", "tablelock-example")
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
	locker, err := tablelock.New(db, sqllock.SQLite, tablelock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// The owner travels in the context: here a worker with a stable name.
	worker := sqllock.WithOwner(ctx, "billing-worker-7")
	outer, err := locker.Acquire(worker, "accounts/42")
	if err != nil {
		log.Fatal(err)
	}
	inner, err := locker.Acquire(worker, "accounts/42") // the same owner: no wait
	if err != nil {
		log.Fatal(err)
	}
	held, err := locker.List(ctx) // what an operator sees
	if err != nil {
		log.Fatal(err)
	}
	for _, in := range held {
		fmt.Printf("%s: owner %s, %d holds, fencing token %d\n", in.Key, in.Owner, in.Holds, in.Token)
	}

	// Without an owner in its context a call is an owner of its own.
	if _, err := locker.TryAcquire(ctx, "accounts/42"); errors.Is(err, sqllock.ErrNotAcquired) {
		fmt.Println("another caller is refused")
	}
	for _, lease := range []sqllock.Lease{inner, outer} {
		if err := lease.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	next, err := locker.TryAcquire(ctx, "accounts/42")
	if err != nil {
		log.Fatal(err)
	}
	defer next.Release(ctx)
	fmt.Println("after both releases the next holder gets fencing token", next.Token())
	// Output:
	// accounts/42: owner billing-worker-7, 2 holds, fencing token 1
	// another caller is refused
	// after both releases the next holder gets fencing token 2
}
