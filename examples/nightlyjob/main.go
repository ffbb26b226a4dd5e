// Command nightlyjob is a replica of a service that runs a nightly job
// through jobguard. Start it several times against one database (three
// terminals, or `for i in 1 2 3; do go run ./examples/nightlyjob -every 2s & done`)
// and at each firing exactly one replica runs the job; the others skip.
//
//	go run ./examples/nightlyjob                          # 02:00 every night, SQLite file in the temp dir
//	go run ./examples/nightlyjob -every 2s                # every 2 seconds, to watch it
//	go run ./examples/nightlyjob -cron '30 3 * * 1-5' -tz Europe/Berlin
//	go run ./examples/nightlyjob -dialect postgres -dsn 'postgres://...'
//	go run ./examples/nightlyjob -dialect mysql -dsn 'user:pass@tcp(host:3306)/db'
//
// The job's write is fenced: it is applied only if no later run has
// written, so a replica paused past its hold cannot overwrite its
// successor's result. The nightly-job recipe in docs/recipes.md is this program's
// replica function; main_test.go runs three replicas on every dialect.
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
	dialectName := flag.String("dialect", "sqlite", "postgres, mariadb, mysql or sqlite")
	dsn := flag.String("dsn", "", "the driver's DSN (default: a SQLite file in the temporary directory)")
	spec := flag.String("cron", "0 2 * * *", "when the job fires, a cron expression")
	tz := flag.String("tz", "Local", "the time zone of -cron")
	every := flag.Duration("every", 0, "fire every period instead of -cron")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("[pid %d] ", os.Getpid()))

	d, err := sqllock.ParseDialect(*dialectName)
	if err != nil {
		log.Fatal(err)
	}
	driver := map[sqllock.Dialect]string{sqllock.Postgres: "pgx", sqllock.MariaDB: "mysql", sqllock.MySQL: "mysql", sqllock.SQLite: "sqlite"}[d]
	if *dsn == "" {
		if d != sqllock.SQLite {
			log.Fatal("-dsn is needed for ", d)
		}
		// WAL: readers do not wait for the writer; busy_timeout: writers
		// from several processes queue instead of failing at once.
		*dsn = "file:" + filepath.Join(os.TempDir(), "nightlyjob.db") + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"
	}
	var sched jobguard.Schedule
	if *every > 0 {
		sched, err = jobguard.Every(*every)
	} else {
		var loc *time.Location
		if loc, err = time.LoadLocation(*tz); err == nil {
			sched, err = jobguard.Cron(*spec, loc)
		}
	}
	if err != nil {
		log.Fatal(err)
	}
	job := jobguard.Job{
		Name:      "nightly-report",
		AtMost:    time.Minute, // a crashed runner frees the job after a minute...
		KeepAlive: true,        // ...while a live one keeps it as long as it runs
		AtLeast:   30 * time.Second,
	}
	if *every > 0 {
		job.AtLeast = *every / 2 // replicas firing up to every/2 late skip
	}

	db, err := sql.Open(driver, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log.Printf("replica of %q, firing %v", job.Name, sched)
	if err := replica(ctx, db, d, job, sched); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

// replica is one replica of a service that builds a nightly report: run it
// in every replica, and at each firing of sched one of them runs the job.
// The report is written through the fence, with the run's token: a run
// paused past its hold (a GC pause, a stopped VM) cannot overwrite the
// report of the run after it.
func replica(ctx context.Context, db *sql.DB, d sqllock.Dialect, job jobguard.Job, sched jobguard.Schedule) error {
	// Every replica migrates at start: concurrent starts apply each
	// migration once.
	if err := migrations.Up(ctx, db, d); err != nil {
		return err
	}
	if err := createReportTable(ctx, db); err != nil {
		return err
	}
	guard, err := jobguard.New(db, d)
	if err != nil {
		return err
	}
	// On shutdown a try in flight gives the job back at once instead of
	// leaving it taken until AtMost.
	defer guard.Close()
	f, err := fence.New(d)
	if err != nil {
		return err
	}
	return guard.Loop(ctx, job, sched, func(ctx context.Context) error {
		// ctx carries the run's lease: Write checks its token in the
		// transaction of the update, and ctx ends if the run loses the job.
		return f.Write(ctx, db, "nightly-report", func(tx *sql.Tx) error {
			// ... build the report ...
			_, err := tx.ExecContext(ctx, `UPDATE nightly_report SET runs = runs + 1 WHERE id = 1`)
			return err
		})
	}, jobguard.WithReport(func(fr jobguard.Firing) {
		switch {
		case fr.Err != nil:
			log.Printf("%s: the report failed: %v", fr.At.Format("15:04:05.000"), fr.Err)
		case fr.Ran:
			log.Printf("%s: built the report", fr.At.Format("15:04:05.000"))
		default:
			log.Printf("%s: skipped, another replica has it", fr.At.Format("15:04:05.000"))
		}
	}))
}

func createReportTable(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS nightly_report (
	id   integer NOT NULL PRIMARY KEY,
	runs integer NOT NULL
)`)
	if err != nil {
		return err
	}
	// A concurrent replica may insert first: a duplicate key is fine.
	_, err = db.ExecContext(ctx, `INSERT INTO nightly_report (id, runs) VALUES (1, 0)`)
	if err != nil && !isDuplicate(err) {
		return err
	}
	return nil
}

func isDuplicate(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "duplicate") || strings.Contains(s, "unique")
}
