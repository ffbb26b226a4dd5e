package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	_ "modernc.org/sqlite"             // driver "sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/holds"
	"github.com/sqllock/sqllock/migrations"
)

// dbFlags are the flags every command that opens a database takes.
type dbFlags struct {
	dsn     string
	dataDir string
}

// newFlags returns a FlagSet for command name with the database flags.
func newFlags(name string, e env, df *dbFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Errors come back from parseArgs as one line; -h prints the usage
	// and the flags on the command's stdout (parseArgs).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	helpOut.Store(fs, e.stdout)
	if df != nil {
		fs.StringVar(&df.dsn, "dsn", e.getenv("SQLLOCK_DSN"), "database: postgres://..., mysql://..., sqlite://path (default $SQLLOCK_DSN, else embedded SQLite)")
		fs.StringVar(&df.dataDir, "data-dir", "", "folder of the embedded SQLite database (default: sqllock in $XDG_STATE_HOME, else in ~/.local/state)")
	}
	return fs
}

// helpOut is where each FlagSet of newFlags prints its -h: the stdout of
// the command that made it. (A FlagSet has no field for it, and its own
// output stays discarded so that errors come back as one line.)
var helpOut sync.Map // *flag.FlagSet -> io.Writer

// commandUsage is the first line of each command's -h.
var commandUsage = map[string]string{
	"demo stock": "demo stock [--strategy S] [--workers N] [--units N] [--procs N] [--work D] [--json] [--dsn DSN]",
	"demo job":   "demo job [--replicas N] [--periods N] [--period D] [--procs N] [--json] [--dsn DSN]",
	"migrate":    "migrate up|status|down [--force] [--all] [--dsn DSN]\n       sqllock migrate export DIR [--dialect D]   (no database: write the embedded .sql files to DIR)",
	"locks":      "locks [--json] [--kind K,...] [--key NAME]... [--dsn DSN]\n       sqllock locks --audit [--json]\n       sqllock locks release KEY --force --reason WHY [--kind K] [--slot N|writer]\n\nKinds: locks, jobs, semaphores, rwlocks, leaders, advisory (all by default).\nA value with a control character (C0, DEL, C1) or invalid UTF-8 is printed\nGo-quoted, whole (\"a\\x1b[2J\"); --json escapes the JSON way.",
	"hold":       "hold KEY [--for 1h] [--ttl 30s] [--owner ID] [--dsn DSN]",
	"bench":      "bench [flags] [--dsn DSN]",
}

// parseArgs parses flags wherever they stand among the positional
// arguments (the flag package stops at the first positional one) and
// returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	defer helpOut.Delete(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				// Asked for: the usage on stdout, and success.
				if w, ok := helpOut.Load(fs); ok {
					fs.SetOutput(w.(io.Writer))
				}
				if line, ok := commandUsage[fs.Name()]; ok {
					fmt.Fprintf(fs.Output(), "usage: sqllock %s\n\n", line)
				}
				fmt.Fprintf(fs.Output(), "flags of sqllock %s:\n", fs.Name())
				fs.PrintDefaults()
				return nil, fail(exitOK, "")
			}
			return nil, fail(exitUsage, "%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// sqliteDSN is the modernc.org/sqlite DSN of the command: WAL so readers do
// not block the writer, a busy timeout so writers queue instead of failing,
// and BEGIN IMMEDIATE so a transaction takes the write lock up front. The
// path is escaped: SQLite reads a file: URI, where '#' would end the path,
// '?' start its parameters and "%41" mean "A", so "team#1" and "team#2"
// would both open "team". An absolute path gets an empty authority
// (file:///path), so that one starting "//" is not read as a host.
func sqliteDSN(path string) string {
	uri := "file:" + sqlitePathEscaper.Replace(path)
	if strings.HasPrefix(path, "/") {
		uri = "file://" + sqlitePathEscaper.Replace(path)
	}
	return uri + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

var sqlitePathEscaper = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")

func sqliteTarget(path string, embedded bool) target {
	display := "sqlite " + path
	if embedded {
		display = "sqlite (embedded) " + path
	}
	return target{dialect: sqllock.SQLite, driver: "sqlite", dsn: sqliteDSN(path),
		display: display, embedded: embedded, path: path}
}

// resolve picks the database: --dsn, or the embedded default, whose
// folder it makes (or checks) when --data-dir does not name one.
func (df dbFlags) resolve() (target, error) {
	if df.dsn != "" {
		if df.dataDir != "" {
			return target{}, fail(exitUsage, "--dsn and --data-dir exclude each other: --data-dir is for the embedded database")
		}
		return parseDSN(df.dsn)
	}
	dir := df.dataDir
	if dir == "" {
		var err error
		if dir, err = defaultDataDir(); err != nil {
			return target{}, err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return target{}, fail(exitUsage, "--data-dir %q: %v", dir, err)
	}
	return sqliteTarget(filepath.Join(abs, "sqllock.db"), true), nil
}

// openMode says what a command needs of the database's schema.
type openMode int

const (
	needMigrated openMode = iota // refuse an unmigrated --dsn; migrate the embedded one
	anySchema                    // the migrate command: it fixes the schema itself
)

// open connects to t and checks its schema. It writes nothing unless t is
// the embedded database, which it creates and migrates on first use.
func open(ctx context.Context, t target, mode openMode) (*sql.DB, error) {
	if dialect.Of(t.dialect).Embedded {
		if t.embedded {
			if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
				return nil, fail(exitBadDSN, "embedded database: %v", err)
			}
			if err := createPrivate(t.path); err != nil {
				return nil, fail(exitBadDSN, "embedded database: %v", err)
			}
		} else if _, err := os.Stat(t.path); err != nil {
			// Opening would create an empty file: only migrate up may.
			if !errors.Is(err, os.ErrNotExist) {
				return nil, fail(exitBadDSN, "%s: %v", t.display, err)
			}
			if mode != anySchema {
				return nil, fail(exitNotMigrated, "%s does not exist: run `sqllock migrate up --dsn %s` to create it", t.path, t.raw)
			}
		}
	}
	db, err := sql.Open(t.driver, t.dsn)
	if err != nil {
		return nil, fail(exitBadDSN, "bad --dsn: %v", err)
	}
	// The command runs many goroutines on one pool (replicas, workers,
	// renewals); with database/sql's default of 2 idle connections each
	// burst closes the rest and the next opens them again, a server
	// process start each (20 ms and far more on a loaded PostgreSQL).
	db.SetMaxIdleConns(16)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := whileBusy(pctx, t, db.PingContext); err != nil {
		db.Close()
		if isBusy(t, err) {
			// The file is there and answers: it is not a bad DSN.
			return nil, fail(exitFailure, "%s stayed busy (another process holds it): %v", t.display, err)
		}
		return nil, fail(exitBadDSN, "cannot reach %s: %v", t.display, err)
	}
	if mode == anySchema {
		return db, nil
	}
	if t.embedded {
		if err := migrateEmbedded(ctx, db, t); err != nil {
			db.Close()
			return nil, fail(exitFailure, "migrating the embedded database %s: %v", t.path, err)
		}
		return db, nil
	}
	if err := checkMigrated(ctx, db, t); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// migrateEmbedded migrates the embedded database, retrying while another
// sqllock process creating the same fresh file holds it busy.
func migrateEmbedded(ctx context.Context, db *sql.DB, t target) error {
	return whileBusy(ctx, t, func(ctx context.Context) error { return migrations.Up(ctx, db, t.dialect) })
}

// busyWait bounds how long whileBusy retries.
const busyWait = 10 * time.Second

// whileBusy runs fn until it returns anything but a SQLite busy error, for
// at most busyWait. Processes that start together on a fresh SQLite file
// meet while one of them creates it and switches it to WAL, and SQLite
// answers some of them SQLITE_BUSY at once instead of waiting out the busy
// timeout (where waiting could deadlock: a reader that must become a
// writer while another writer waits for it to leave); a fresh try a moment
// later succeeds. On PostgreSQL and MySQL it runs fn once.
func whileBusy(ctx context.Context, t target, fn func(context.Context) error) error {
	deadline := time.Now().Add(busyWait)
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || !isBusy(t, err) || time.Now().After(deadline) {
			return err
		}
		pause := min(time.Duration(attempt)*10*time.Millisecond, 200*time.Millisecond)
		select {
		case <-time.After(pause/2 + rand.N(pause/2+1)):
		case <-ctx.Done():
			return err
		}
	}
}

// isBusy reports SQLITE_BUSY or SQLITE_LOCKED from t, a SQLite database.
func isBusy(t target, err error) bool {
	return dialect.Of(t.dialect).SerialWriters && dberr.IsRetryable(err)
}

// checkMigrated reports an unmigrated database without writing to it:
// goose's own check creates the version table, so look for it first.
func checkMigrated(ctx context.Context, db *sql.DB, t target) error {
	exists, err := versionTableExists(ctx, db, t.dialect)
	if err != nil {
		return fail(exitFailure, "checking migrations of %s: %v", t.display, err)
	}
	if !exists {
		return fail(exitNotMigrated, "%s is not migrated: run `sqllock migrate up` with the same --dsn", t.display)
	}
	pending, err := migrations.Pending(ctx, db, t.dialect)
	if err != nil {
		return fail(exitFailure, "checking migrations of %s: %v", t.display, err)
	}
	if pending {
		return fail(exitNotMigrated, "%s has pending migrations: run `sqllock migrate up` with the same --dsn", t.display)
	}
	return nil
}

func versionTableExists(ctx context.Context, db *sql.DB, d sqllock.Dialect) (bool, error) {
	return holds.TableExists(ctx, db, d, migrations.VersionTable)
}

// withDB resolves and opens the database of df for a command. Its errors,
// and fn's, are scrubbed of the DSN's passwords: drivers and servers may
// quote what they were given.
func withDB(ctx context.Context, df dbFlags, mode openMode, fn func(t target, db *sql.DB) error) error {
	t, err := df.resolve()
	if err != nil {
		return err
	}
	db, err := open(ctx, t, mode)
	if err != nil {
		return t.scrub(err)
	}
	defer db.Close()
	if dialect.Of(t.dialect).ProbesServer {
		// The server's flavour picks the path (MySQL 8 and Galera take
		// the common one), unless the DSN named it.
		if !t.pinned {
			if t.dialect, err = sqllock.ServerDialect(ctx, db, t.dialect); err != nil {
				return t.scrub(err)
			}
		}
	}
	return t.scrub(fn(t, db))
}
