package jobguard_test

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
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/migrations"
)

// Three replicas fire the nightly report at the same moment: one runs it,
// the others skip. With PostgreSQL or MariaDB only the sql.Open line and the
// dialect change.
func Example() {
	dir, _ := os.MkdirTemp("", "jobguard-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "jobs.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := migrations.Up(ctx, db, sqllock.SQLite); err != nil {
		log.Fatal(err)
	}

	guard, err := jobguard.New(db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer guard.Close()
	job := jobguard.Job{
		Name:    "nightly-report",
		AtMost:  time.Hour,        // a crashed runner frees the job after an hour
		AtLeast: 10 * time.Minute, // a replica firing a little late skips
	}
	for replica := 1; replica <= 3; replica++ {
		ran, err := guard.Run(ctx, job, func(ctx context.Context) error {
			// ctx ends before AtMost; hand the token to the report's writes.
			token, _ := sqllock.TokenFrom(ctx)
			fmt.Printf("replica %d runs the report with fencing token %d\n", replica, token)
			return nil
		})
		if err != nil {
			log.Fatal(err)
		}
		if !ran {
			fmt.Printf("replica %d skips: the report already ran\n", replica)
		}
	}
	// Output:
	// replica 1 runs the report with fencing token 1
	// replica 2 skips: the report already ran
	// replica 3 skips: the report already ran
}
