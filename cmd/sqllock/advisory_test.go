package main

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// holdAdvisory takes key with an advisory Locker on db until the test ends.
func holdAdvisory(t *testing.T, db *sql.DB, d sqllock.Dialect, key string) {
	t.Helper()
	l, err := advisory.New(db, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	lease, err := l.Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lease.Release(context.Background()) })
}

func findAdvisory(rows []lockRow, key string) *lockRow {
	for i := range rows {
		if rows[i].Kind == "advisory" && rows[i].Key == key {
			return &rows[i]
		}
	}
	return nil
}

// `sqllock locks` once said "no locks held" while an advisory lock was
// held. It now lists them where the server shows them, and says what it
// cannot see where it does not.
func TestLocksShowsAdvisory(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB} {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Open(t, d)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key := locktest.Key(t)
			holdAdvisory(t, db.DB, d, key)

			rows, notes, err := advisoryLocks(ctx, db.DB, d, advisory.DefaultNamespace, []string{key})
			if err != nil {
				t.Fatal(err)
			}
			r := findAdvisory(rows, key)
			if r == nil || r.State != "held" || r.Owner == "" {
				t.Fatalf("the held key named with --key: %+v in %+v (notes %q)", r, rows, notes)
			}

			rows, notes, err = advisoryLocks(ctx, db.DB, d, advisory.DefaultNamespace, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("unnamed: %d rows, notes %q", len(rows), notes)
			switch d {
			case sqllock.Postgres:
				id := "id " + strconv.FormatInt(advisory.PostgresKey(advisory.DefaultNamespace, key), 10)
				if findAdvisory(rows, id) == nil {
					t.Errorf("the held key is not listed as %s: %+v", id, rows)
				}
				if len(notes) == 0 || !strings.Contains(notes[0], "--key") {
					t.Errorf("notes %q do not say how to name the ids", notes)
				}
			case sqllock.MariaDB:
				var ps int
				if err := db.QueryRowContext(ctx, "SELECT @@performance_schema").Scan(&ps); err != nil {
					t.Fatal(err)
				}
				if ps == 1 && findAdvisory(rows, key) == nil {
					t.Errorf("performance_schema is on, and the held key is not listed: %+v", rows)
				}
				if ps == 0 && (len(notes) == 0 || !strings.Contains(notes[0], "performance_schema is off")) {
					t.Errorf("performance_schema is off and the notes %q do not say so", notes)
				}
			}
		})
	}
}

// With performance_schema on, every GET_LOCK is listed by name, waiters
// too. The shared test server runs with it off (MariaDB's default), so
// this runs against a server named by SQLLOCK_MYSQL_PS_DSN, when set.
func TestLocksMySQLPerformanceSchema(t *testing.T) {
	dsn := os.Getenv("SQLLOCK_MYSQL_PS_DSN")
	if dsn == "" {
		t.Skip("SQLLOCK_MYSQL_PS_DSN is unset: no MariaDB with performance_schema=ON to list GET_LOCKs from")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := locktest.Key(t)
	name := advisory.MySQLName(advisory.DefaultNamespace, key)
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var got int
	if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK: %d, %v", got, err)
	}
	waiter, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	go waiter.ExecContext(ctx, "SELECT GET_LOCK(?, 2)", name)
	time.Sleep(300 * time.Millisecond)
	rows, notes, err := advisoryLocks(ctx, db, sqllock.MariaDB, advisory.DefaultNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	var held, waiting int
	for _, r := range rows {
		if r.Kind == "advisory" && r.Key == key {
			switch r.State {
			case "held":
				held++
			case "waiting":
				waiting++
			}
		}
	}
	if held != 1 || waiting != 1 || len(notes) != 0 {
		t.Errorf("rows %+v, notes %q; want the key held once and awaited once, nothing unseen", rows, notes)
	}
	holder.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", name)
}
