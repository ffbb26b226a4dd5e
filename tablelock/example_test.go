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

// Two workers want the same invoice run: the first holds it, the second is
// refused at once, and the next holder after the release gets a larger
// fencing token. On the embedded SQLite; with PostgreSQL or MariaDB only
// the sql.Open line and the dialect change.
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

	lease, err := locker.Acquire(ctx, "invoices/2024-06")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker 1 holds the run with fencing token", lease.Token())

	if _, err := locker.TryAcquire(ctx, "invoices/2024-06"); errors.Is(err, sqllock.ErrNotAcquired) {
		fmt.Println("worker 2 is refused: the run is held")
	}

	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	next, err := locker.TryAcquire(ctx, "invoices/2024-06")
	if err != nil {
		log.Fatal(err)
	}
	defer next.Release(ctx)
	fmt.Println("worker 2 holds it now with fencing token", next.Token())
	// Output:
	// worker 1 holds the run with fencing token 1
	// worker 2 is refused: the run is held
	// worker 2 holds it now with fencing token 2
}

// An owner that holds a key takes it again at once: reentrant holds share
// the row and its token, and the key is free after as many Releases. List
// shows what an operator sees.
func Example_reentrant() {
	dir, _ := os.MkdirTemp("", "tablelock-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := migrations.Up(context.Background(), db, sqllock.SQLite); err != nil {
		log.Fatal(err)
	}
	locker, err := tablelock.New(db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// The owner travels in the context: here a worker with a stable name.
	ctx := sqllock.WithOwner(context.Background(), "billing-worker-7")
	outer, err := locker.Acquire(ctx, "accounts/42")
	if err != nil {
		log.Fatal(err)
	}
	inner, err := locker.Acquire(ctx, "accounts/42") // the same owner: no wait
	if err != nil {
		log.Fatal(err)
	}
	infos, err := locker.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, in := range infos {
		fmt.Printf("%s held by %s: %d holds, token %d (shared: %v)\n", in.Key, in.Owner, in.Holds, in.Token, inner.Token() == outer.Token())
	}
	for _, l := range []sqllock.Lease{inner, outer} {
		if err := l.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	infos, _ = locker.List(ctx)
	fmt.Println("held after both releases:", len(infos))
	// Output:
	// accounts/42 held by billing-worker-7: 2 holds, token 1 (shared: true)
	// held after both releases: 0
}
