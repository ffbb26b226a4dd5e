package rwlock_test

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
	"github.com/sqllock/sqllock/rwlock"
)

// Two readers share the catalog; a writer is refused until both are done.
// On the embedded SQLite; with PostgreSQL or MariaDB only the sql.Open
// line and the dialect change.
func Example() {
	dir, _ := os.MkdirTemp("", "rwlock-example")
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
	rw, err := rwlock.New(db, sqllock.SQLite, 4)
	if err != nil {
		log.Fatal(err)
	}
	defer rw.Close()

	r1, err := rw.RLock(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	r2, err := rw.RLock(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	_, err = rw.TryLock(ctx, "catalog")
	fmt.Println("writer beside readers refused:", errors.Is(err, sqllock.ErrNotAcquired))
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)

	w, err := rw.Lock(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("writer's token above the readers':", w.Token() > max(r1.Token(), r2.Token()))
	_ = w.Release(ctx)
	// Output:
	// writer beside readers refused: true
	// writer's token above the readers': true
}
