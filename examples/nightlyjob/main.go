// Command nightlyjob is a replica of a service that runs a scheduled job
// through jobguard. Start it several times against one database (three
// terminals, or `for i in 1 2 3; do go run ./examples/nightlyjob & done`)
// and each period exactly one replica runs the job; the others skip.
//
//	go run ./examples/nightlyjob                          # SQLite file in the temp dir
//	go run ./examples/nightlyjob -dialect postgres -dsn 'postgres://...'
//	go run ./examples/nightlyjob -dialect mysql -dsn 'user:pass@tcp(host:3306)/db'
//
// The job's write is fenced: it records its token only if no later run has
// recorded a larger one, so a replica paused past its hold-at-most cannot
// overwrite its successor's result.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/migrations"
)

func main() {
	dialectName := flag.String("dialect", "sqlite", "postgres, mysql or sqlite")
	dsn := flag.String("dsn", "", "the driver's DSN (default: a SQLite file in the temporary directory)")
	every := flag.Duration("every", 2*time.Second, "the job's schedule")
	runs := flag.Int("periods", 5, "periods to run before exiting (0: until Ctrl-C)")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("[pid %d] ", os.Getpid()))

	d, err := sqllock.ParseDialect(*dialectName)
	if err != nil {
		log.Fatal(err)
	}
	driver := map[sqllock.Dialect]string{sqllock.Postgres: "pgx", sqllock.MySQL: "mysql", sqllock.SQLite: "sqlite"}[d]
	if *dsn == "" {
		if d != sqllock.SQLite {
			log.Fatal("-dsn is needed for ", d)
		}
		*dsn = "file:" + filepath.Join(os.TempDir(), "nightlyjob.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
	}
	db, err := sql.Open(driver, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// Every replica runs the migrations at start: concurrent starts apply
	// each one once.
	if err := migrations.Up(ctx, db, d); err != nil {
		log.Fatal(err)
	}
	if err := createResultTable(ctx, db); err != nil {
		log.Fatal(err)
	}
	guard, err := jobguard.New(db, d)
	if err != nil {
		log.Fatal(err)
	}
	// On Ctrl-C a try in flight gives its job back before the process
	// exits, instead of leaving it taken until AtMost.
	defer guard.Close()
	f, err := fence.New(d)
	if err != nil {
		log.Fatal(err)
	}
	job := jobguard.Job{
		Name:    "examples/nightly-report",
		AtMost:  *every,     // the run's context ends before the next period could start it again
		AtLeast: *every / 2, // replicas firing up to every/2 late skip
	}

	// Fire at the period boundaries of the wall clock, as cron would, so
	// replicas started at different times agree on the periods.
	for i := 0; *runs == 0 || i < *runs; i++ {
		next := time.Now().Truncate(*every).Add(*every)
		select {
		case <-time.After(time.Until(next)):
		case <-ctx.Done():
			return
		}
		ran, err := guard.Run(ctx, job, func(ctx context.Context) error {
			return report(ctx, db, d, f)
		})
		switch {
		case err != nil:
			log.Printf("period %s: the job failed: %v", next.Format("15:04:05"), err)
		case !ran:
			log.Printf("period %s: skipped, another replica has it", next.Format("15:04:05"))
		}
	}
}

// report is the job: it records the run with a fenced write, applied only
// if no later run (a larger token) has written already.
func report(ctx context.Context, db *sql.DB, d sqllock.Dialect, f *fence.Fence) error {
	token, _ := sqllock.TokenFrom(ctx)
	host, _ := os.Hostname()
	runner := fmt.Sprintf("%s/%d", host, os.Getpid())
	time.Sleep(100 * time.Millisecond) // the work
	q := `UPDATE nightly_report SET last_token = ?, ran_by = ?, ran_at = ? WHERE id = 1`
	if d == sqllock.Postgres {
		q = `UPDATE nightly_report SET last_token = $1, ran_by = $2, ran_at = $3 WHERE id = 1`
	}
	// Write checks the run's token (from ctx) in the same transaction as
	// the update: a stale run gets sqllock.ErrStaleToken and writes nothing.
	err := f.Write(ctx, db, "nightly_report", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, token, runner, time.Now().UTC().Format(time.RFC3339Nano))
		return err
	})
	if err != nil {
		return err
	}
	log.Printf("ran the report with fencing token %d", token)
	return nil
}

func createResultTable(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS nightly_report (
	id         integer      NOT NULL PRIMARY KEY,
	last_token bigint       NOT NULL,
	ran_by     varchar(255) NOT NULL,
	ran_at     varchar(64)  NOT NULL
)`)
	if err != nil {
		return err
	}
	// A concurrent replica may insert first: a duplicate key is fine.
	_, err = db.ExecContext(ctx, `INSERT INTO nightly_report (id, last_token, ran_by, ran_at) VALUES (1, 0, '', '')`)
	if err != nil && !isDuplicate(err) {
		return err
	}
	return nil
}

func isDuplicate(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "duplicate") || strings.Contains(s, "unique")
}
