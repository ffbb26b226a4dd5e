package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
)

// An application migrates sqllock's tables at start, before it makes a
// Locker; Pending tells a replica that may not migrate whether it must
// wait for one that does. On the embedded SQLite; with PostgreSQL or
// MariaDB only the sql.Open line and the dialect change.
func Example() {
	dir, _ := os.MkdirTemp("", "migrations-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	before, err := migrations.Pending(ctx, db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	if err := migrations.Up(ctx, db, sqllock.SQLite); err != nil {
		log.Fatal(err)
	}
	after, err := migrations.Pending(ctx, db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending before Up:", before)
	fmt.Println("pending after Up:", after)
	// Output:
	// pending before Up: true
	// pending after Up: false
}
