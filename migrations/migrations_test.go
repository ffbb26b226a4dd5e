package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
)

func hasTable(t *testing.T, db *testdb.DB, table string) bool {
	t.Helper()
	var q string
	switch db.Dialect {
	case sqllock.Postgres:
		q = "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1"
	case sqllock.MariaDB, sqllock.MySQL:
		q = "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?"
	case sqllock.SQLite:
		q = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
	}
	var n int
	if err := db.QueryRow(q, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// Up creates the lock table and the fence, records its version in sqllock's
// own table, Down removes everything, and Up works again after it.
func TestUpDownUp(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Scratch(t, d)
			ctx := context.Background()
			pending, err := migrations.Pending(ctx, db.DB, d)
			if err != nil || !pending {
				t.Fatalf("Pending on an empty database = %v, %v; want true", pending, err)
			}
			for round := range 2 {
				if err := migrations.Up(ctx, db.DB, d); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if !hasTable(t, db, "sqllock_locks") || !hasTable(t, db, migrations.VersionTable) {
					t.Fatalf("round %d: Up did not create sqllock_locks and %s", round, migrations.VersionTable)
				}
				if hasTable(t, db, "goose_db_version") {
					t.Fatal("goose's global version table used")
				}
				if pending, err := migrations.Pending(ctx, db.DB, d); err != nil || pending {
					t.Fatalf("Pending after Up = %v, %v", pending, err)
				}
				if err := migrations.Down(ctx, db.DB, d); err != nil {
					t.Fatalf("round %d: Down: %v", round, err)
				}
				if hasTable(t, db, "sqllock_locks") {
					t.Fatalf("round %d: sqllock_locks survived Down", round)
				}
			}
		})
	}
	if _, err := migrations.NewProvider(&sql.DB{}, sqllock.Dialect(42)); !errors.Is(err, sqllock.ErrUnsupported) {
		t.Errorf("unknown dialect: %v, want ErrUnsupported", err)
	}
}

// Replicas starting at once all migrate the same fresh database: each
// migration is applied once and every Up succeeds.
func TestConcurrentUp(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d.String(), func(t *testing.T) {
			scratch := testdb.Scratch(t, d)
			var wg sync.WaitGroup
			errs := make(chan error, 6)
			for range 6 {
				// One handle each, as separate processes would have.
				db, err := sql.Open(scratch.Driver, scratch.DSN)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				wg.Go(func() { errs <- migrations.Up(context.Background(), db, d) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			var applied, distinct int
			q := "SELECT count(*), count(DISTINCT version_id) FROM " + migrations.VersionTable + " WHERE version_id > 0"
			if err := scratch.QueryRow(q).Scan(&applied, &distinct); err != nil {
				t.Fatal(err)
			}
			if applied != distinct {
				t.Fatalf("%d version rows for %d migrations: one was applied twice", applied, distinct)
			}
		})
	}
}
