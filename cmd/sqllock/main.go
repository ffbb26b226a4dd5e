// Command sqllock runs, inspects and measures sqllock's locks on a database.
//
//	sqllock demo stock                 # workers buy from a stock through each strategy
//	sqllock demo job                   # replicas run one scheduled job, once a period
//	sqllock migrate up|status          # the embedded goose migrations
//	sqllock migrate down --force       # roll back the newest (--all: every one)
//	sqllock locks                      # every hold: locks, jobs, permits, rwlocks, leaders, advisory
//	sqllock locks --watch              # the same, redrawn every second, with waiters
//	sqllock locks release KEY --force --reason "INC-7"  # free the holder it shows, audited
//	sqllock locks --audit              # who forced which release, and why
//	sqllock hold KEY                   # hold a lock until interrupted or lost
//	sqllock bench                      # lock rates and handoff beside raw SQL
//	sqllock web                        # a live page of every hold, on 127.0.0.1:8080
//
// Every command takes --dsn: postgres://user:pass@host:port/db?sslmode=...
// (or the pgx keyword form "host=... dbname=..."), mysql://user:pass@host:port/db?params
// (or the go-sql-driver form user:pass@tcp(host:port)/db, user:pass@/db for
// 127.0.0.1:3306), or sqlite://path. In a URL, reserved characters in the
// user name and password are percent-encoded (@ as %40, # as %23); the
// query's parameters all reach the driver. A sqlite:// path is taken as
// written, '#' and '%' included; it takes no ?parameters (the command sets
// its own). On a postgres DSN, sqllock_pooler=transaction declares a
// transaction-pooling proxy (PgBouncer's pool_mode = transaction): every
// Locker the command builds works through it, and the commands that
// cannot (migrate up|down) refuse at once saying why. On a mysql DSN the
// server picks the path (MariaDB's own on MariaDB, the MySQL path on MySQL
// 8 and Galera) unless sqllock_dialect=mariadb or sqllock_dialect=mysql
// (mysql8 is an old alias) names it; sqllock_single_writer=1 declares that
// lock traffic reaches one Galera node.
// SQLLOCK_DSN is the default. Without either, the command uses
// an embedded SQLite file in --data-dir (default: a sqllock folder in the
// user's state folder, $XDG_STATE_HOME or else ~/.local/state, made 0700;
// one that another user owns or may write to is refused), migrated on
// first use, so it runs with no server at all. A
// database named by --dsn is never migrated behind the operator's back:
// commands other than migrate refuse it until `sqllock migrate up` has run.
//
// No output shows a password: errors show the DSN masked from the start to
// its last '@' and at every password= value, whether or not it parses.
//
// Exit codes, for scripts:
//
//	0  success
//	1  the command ran and failed: a database error, a demo that found a
//	   double sale or a doubled job run, a lock that is not held, a lease lost
//	2  usage: unknown command or flag, missing argument, locks release or
//	   migrate down without --force (which then say what they would do)
//	3  bad DSN: it cannot be parsed, or the database cannot be reached (a
//	   SQLite file that stays busy is a failure, 1: it was reached)
//	4  the database is not migrated: run `sqllock migrate up`
//	5  a strategy the database cannot serve, or not built into this binary
//
// Errors are one line on stderr, prefixed "sqllock: ".
//
// The command uses the standard flag package: a handful of subcommands with
// a few flags each need no CLI library, and a dependency in the module's
// go.mod would land in every program that imports the locks. Flags may come
// before or after positional arguments.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

// Exit codes; see the package doc.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitBadDSN      = 3
	exitNotMigrated = 4
	exitUnsupported = 5
)

// exitError is an error with the exit code it ends the command with.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// env is what a command reads and writes: the process's, or a test's.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(code)
}

const usage = `usage: sqllock <command> [flags]

commands:
  demo stock        N workers buy from M units through each strategy
  demo job          replicas run one scheduled job through jobguard
  migrate up|status apply or list the embedded migrations
  migrate down --force [--all]
                    roll back the newest migration (--all: every one); it
                    drops tables, and without --force says which
  locks             list every hold, grouped: locks, jobs, semaphore
                    permits, rwlock holds, leaders, advisory locks
                    (--kind to choose); values with control characters
                    are printed Go-quoted
  locks --watch     the same, redrawn every second: held for, expires in,
                    and on PostgreSQL the sessions waiting for a lock
  locks release KEY --force --reason WHY [--kind K] [--slot N|writer]
                    free the holder of a hold it shows, unless it changed
                    hands meanwhile; recorded with the reason in the
                    audit trail
  locks --audit     list the audit trail of force releases
  hold KEY          hold a lock until --for passes, Ctrl-C, or it is lost
  bench             lock rates and handoff latency beside raw SQL
  web               a live page of every hold, with charts and the audit
                    trail (loopback, read only unless --allow-force)

common flags:
  --dsn DSN         postgres://..., mysql://..., sqlite://path (default $SQLLOCK_DSN;
                    without it an embedded SQLite file in --data-dir); on
                    mysql, ?sqllock_dialect=mariadb|mysql names the path
                    the server would otherwise pick
  --data-dir DIR    folder of the embedded SQLite database (default
                    ~/.local/state/sqllock, or in $XDG_STATE_HOME)

Run "sqllock <command> -h" for the flags of a command.
`

const demoUsage = `usage: sqllock demo stock|job [flags]

demos:
  stock   N workers buy from M units through each strategy, and count oversold
  job     replicas run one scheduled job through jobguard, and count double runs

Run "sqllock demo stock -h" or "sqllock demo job -h" for their flags.
`

// run runs one command line and returns the exit code.
func run(ctx context.Context, args []string, e env) int {
	err := dispatch(ctx, args, e)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: exitFailure, msg: err.Error()}
	}
	if ee.msg != "" {
		fmt.Fprintln(e.stderr, "sqllock: "+oneLine(ee.msg))
	}
	return ee.code
}

// oneLine keeps an error to one line: drivers put newlines in some. A
// message may quote what the database holds (a driver's "Duplicate entry
// '...'"): its control characters are shown escaped.
func oneLine(s string) string {
	return escapeControls(strings.Join(strings.Fields(s), " "))
}

func dispatch(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return fail(exitUsage, "")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(e.stdout, usage)
		return nil
	case "demo":
		if len(rest) == 0 {
			return fail(exitUsage, "demo needs a name: demo stock or demo job")
		}
		switch rest[0] {
		case "stock":
			return cmdStock(ctx, rest[1:], e)
		case "job":
			return cmdJob(ctx, rest[1:], e)
		case "help", "-h", "-help", "--help":
			fmt.Fprint(e.stdout, demoUsage)
			return nil
		}
		return fail(exitUsage, "unknown demo %q: want stock or job", rest[0])
	case "migrate":
		return cmdMigrate(ctx, rest, e)
	case "locks":
		return cmdLocks(ctx, rest, e)
	case "hold":
		return cmdHold(ctx, rest, e)
	case "bench":
		return cmdBench(ctx, rest, e)
	case "web":
		return cmdWeb(ctx, rest, e)
	case workerCommand:
		return cmdWorker(ctx, rest, e)
	}
	return fail(exitUsage, "unknown command %q (run sqllock help)", cmd)
}
