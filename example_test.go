package sqllock_test

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
	"github.com/sqllock/sqllock/tablelock"
)

// Guard a nightly job so that one replica runs it, on the embedded SQLite
// default. With PostgreSQL or MariaDB only the sql.Open line and the
// dialect change.
func Example() {
	dir, _ := os.MkdirTemp("", "sqllock-example")
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
	locker, err := tablelock.New(db, sqllock.SQLite, tablelock.WithTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = sqllock.Do(ctx, locker, "nightly-report", func(ctx context.Context) error {
		// ctx is cancelled if the lease is lost; hand the token to the writes.
		token, _ := sqllock.TokenFrom(ctx)
		fmt.Println("running the report with fencing token", token)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: running the report with fencing token 1
}
