package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/tablelock"
)

// TestWithoutRowid (migration 00021, SQLite): Up rebuilds the lock tables
// WITHOUT ROWID and a lock held across it stays held, its token kept;
// the triggers still bump the fence row, so the next holder's token is
// above; Down rebuilds them as rowid tables, rows kept, and the same
// holds.
func TestWithoutRowid(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := testdb.Scratch(t, sqllock.SQLite)
	p, err := migrations.NewProvider(db.DB, sqllock.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 18); err != nil {
		t.Fatal(err)
	}
	l, err := tablelock.New(db.DB, sqllock.SQLite, tablelock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held, err := l.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	last := held.Token()
	check := func(step string, wantWR int) {
		t.Helper()
		for _, table := range []string{tablelock.DefaultTable, "sqllock_jobs"} {
			var wr int
			if err := db.QueryRowContext(ctx, `SELECT wr FROM pragma_table_list WHERE name = ?`, table).Scan(&wr); err != nil || wr != wantWR {
				t.Fatalf("%s: %s without rowid = %d (%v), want %d", step, table, wr, err, wantWR)
			}
		}
		var tok int64
		if err := db.QueryRowContext(ctx, `SELECT token FROM sqllock_locks WHERE lock_key = 'held'`).Scan(&tok); err != nil || tok != held.Token() {
			t.Fatalf("%s: the held row's token %d (%v), want %d", step, tok, err, held.Token())
		}
		other, err := l.TryAcquire(ctx, "held")
		if err == nil {
			other.Release(ctx)
			t.Fatalf("%s: the held key was taken again", step)
		}
		next, err := l.Acquire(ctx, step)
		if err != nil {
			t.Fatal(err)
		}
		if next.Token() <= last {
			t.Fatalf("%s: token %d after %d", step, next.Token(), last)
		}
		last = next.Token()
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var fence int64
		if err := db.QueryRowContext(ctx, `SELECT value FROM sqllock_fence WHERE id = 1`).Scan(&fence); err != nil || fence != last {
			t.Fatalf("%s: fence row at %d (%v), want the last token %d", step, fence, err, last)
		}
	}
	if _, err := p.UpTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	check("up", 1)
	if _, err := p.DownTo(ctx, 18); err != nil {
		t.Fatal(err)
	}
	check("down", 0)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
