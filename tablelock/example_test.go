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

// A holder about to make a call that may block for longer than its TTL
// extends its lease first. Renewal goes on and never shortens the
// extension; Release frees the key at once whatever is left of it.
func ExampleLease_Extend() {
	dir, _ := os.MkdirTemp("", "tablelock-extend")
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

	lease, err := locker.Acquire(ctx, "exports/daily")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	// sqllock.Extend works on any Lease: ErrUnsupported for the leases a
	// session holds (rowlock, advisory), which have nothing to extend.
	if err := sqllock.Extend(ctx, lease, 10*time.Minute); err != nil {
		log.Fatal(err) // ErrLockLost: the key is no longer ours; stop
	}
	held, err := locker.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	left := held[0].ExpiresAt.Sub(held[0].AcquiredAt) - held[0].HeldFor
	fmt.Println("held for more than the TTL:", left > 9*time.Minute)
	// Output:
	// held for more than the TTL: true
}

// An operator frees a hung holder's key; the release and its audit record
// commit together, and the trail says whom it freed and why.
func ExampleLocker_ForceRelease() {
	dir, _ := os.MkdirTemp("", "tablelock-force")
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
	locker, err := tablelock.New(db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	hung, err := locker.Acquire(sqllock.WithOwner(ctx, "billing-worker-7"), "accounts/42")
	if err != nil {
		log.Fatal(err)
	}

	held, err := locker.List(ctx) // what the operator sees: key, owner, token
	if err != nil {
		log.Fatal(err)
	}
	if _, err := locker.ForceRelease(ctx, held[0].Key, held[0].Token, tablelock.Reason("INC-7: worker hung")); err != nil {
		log.Fatal(err)
	}
	trail, err := tablelock.AuditLog(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range trail {
		fmt.Printf("%s %s: freed owner %s, token %d: %s\n", e.Action, e.Key, e.Owner, e.Token, e.Reason)
	}
	fmt.Println("the holder finds out:", errors.Is(hung.Release(ctx), sqllock.ErrLockLost))
	// Output:
	// force-release accounts/42: freed owner billing-worker-7, token 1: INC-7: worker hung
	// the holder finds out: true
}

// Workers in several processes take turns on one queue in the order they
// asked for it: a worker that finishes a batch and asks again at once goes
// to the back of the line instead of taking the key straight back.
// PostgreSQL only, through the pgx stdlib driver (its calls use LISTEN);
// every Locker on the table turns it on. Not run: it needs a server.
func ExampleWithFairness() {
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	locker, err := tablelock.New(db, sqllock.Postgres, tablelock.WithFairness(true))
	if err != nil {
		log.Fatal(err) // ErrUnsupported on MariaDB and SQLite
	}
	defer locker.Close()
	ctx := context.Background()
	for {
		err := sqllock.Do(ctx, locker, "queues/invoices", func(ctx context.Context) error {
			return processBatch(ctx)
		})
		if err != nil {
			log.Fatal(err)
		}
	}
}

// processBatch stands for the work done under the lock.
func processBatch(context.Context) error { return nil }
