package reaper_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/reaper"
	"github.com/sqllock/sqllock/tablelock"
)

// A table whose keys come and go (one per order, say) keeps a row per key
// until a reaper deletes it. Here a sweep deletes a released key's row
// once its grace has passed; an application runs reaper.Run in a goroutine
// of one replica instead. On the embedded SQLite; with PostgreSQL or
// MariaDB only the sql.Open line and the dialect change.
func Example() {
	dir, _ := os.MkdirTemp("", "reaper-example")
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
	lease, err := locker.Acquire(ctx, "order/1042")
	if err != nil {
		log.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}

	r, err := reaper.New(db, sqllock.SQLite, reaper.WithGrace(10*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the grace passes
	n, err := r.Sweep(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows deleted:", n)
	// Output: rows deleted: 1
}
