package reaper_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/reaper"
	"github.com/sqllock/sqllock/tablelock"
)

// insertRow writes a lock row whose expiry is offset from the database's now.
func insertRow(t *testing.T, db *testdb.DB, table, key, owner string, offset time.Duration) {
	t.Helper()
	us := offset.Microseconds()
	var q string
	switch db.Dialect {
	case sqllock.Postgres:
		q = `INSERT INTO ` + table + ` VALUES ($1, $2, 'test', 1, sqllock_next_token(), now(), now() + $3 * interval '1 microsecond')`
	case sqllock.MariaDB, sqllock.MySQL:
		q = `INSERT INTO ` + table + ` VALUES (?, ?, 'test', 1, NEXTVAL(sqllock_fence_seq), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`
	case sqllock.SQLite:
		q = `INSERT INTO ` + table + ` VALUES (?, ?, 'test', 1, 1, 0, CAST(unixepoch('subsec') * 1000000 AS INTEGER) + ?)`
	}
	if _, err := db.Exec(q, key, owner, us); err != nil {
		t.Fatal(err)
	}
}

func countKeys(t *testing.T, db *testdb.DB, table, prefix string) int {
	t.Helper()
	var n int
	q := "SELECT count(*) FROM " + table + " WHERE lock_key LIKE " + map[bool]string{true: "$1", false: "?"}[db.Dialect == sqllock.Postgres]
	if err := db.QueryRow(q, prefix+"%").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// scratchTable makes an empty lock table private to the test, so sweeps
// never touch rows of tests running in parallel.
func scratchTable(t *testing.T, db *testdb.DB) string {
	t.Helper()
	name := fmt.Sprintf("reaper_%d", time.Now().UnixNano()%1e12)
	if err := tablelock.CreateTable(context.Background(), db.DB, db.Dialect, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + name) })
	return name
}

func TestSweepDeletesOnlyExpiredInBatches(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		table := scratchTable(t, db)
		p := locktest.Key(t)
		for i := range 7 {
			insertRow(t, db, table, fmt.Sprintf("%s/expired/%d", p, i), "gone", -time.Minute)
		}
		insertRow(t, db, table, p+"/grace", "recent", -time.Second) // expired, within grace
		insertRow(t, db, table, p+"/held", "alive", time.Minute)

		r, err := reaper.New(db.DB, db.Dialect, reaper.WithTable(table), reaper.WithBatchSize(3), reaper.WithGrace(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n, err := r.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != 7 {
			t.Errorf("Sweep deleted %d rows, want 7", n)
		}
		if got := countKeys(t, db, table, p+"/expired/"); got != 0 {
			t.Errorf("%d expired rows left", got)
		}
		if got := countKeys(t, db, table, p+"/grace"); got != 1 {
			t.Errorf("row within its grace period deleted")
		}
		if got := countKeys(t, db, table, p+"/held"); got != 1 {
			t.Errorf("live row deleted")
		}
	})
}

// A holder that died long ago (its row expired) is reaped; the key is then
// taken again with a larger token, and the old lease, had it survived,
// learns it is lost.
func TestReapedKeyComesBackWithLargerToken(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		table := scratchTable(t, db)
		l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTable(table), tablelock.WithTTL(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		key := locktest.Key(t)
		old, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		expire := map[sqllock.Dialect]string{
			sqllock.Postgres: "UPDATE " + table + " SET expires_at = now() - interval '1 hour' WHERE lock_key = $1",
			sqllock.MariaDB:  "UPDATE " + table + " SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE lock_key = ?",
			sqllock.MySQL:    "UPDATE " + table + " SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE lock_key = ?",
			sqllock.SQLite:   "UPDATE " + table + " SET expires_at = 0 WHERE lock_key = ?",
		}[db.Dialect]
		if _, err := db.Exec(expire, key); err != nil {
			t.Fatal(err)
		}
		r, err := reaper.New(db.DB, db.Dialect, reaper.WithTable(table), reaper.WithGrace(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := r.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("Sweep = %d, %v; want 1", n, err)
		}
		select {
		case <-old.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the reaped lease never reported its loss")
		}
		if !errors.Is(old.Err(), sqllock.ErrLockLost) {
			t.Fatalf("old lease Err = %v", old.Err())
		}
		next, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer next.Release(ctx)
		if next.Token() <= old.Token() {
			t.Fatalf("token after reap %d not above %d", next.Token(), old.Token())
		}
	})
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.w)
}

func TestNotifiesWaitersOnPostgres(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	table := scratchTable(t, db)
	p := locktest.Key(t)
	insertRow(t, db, table, p+"/dead", "crashed-holder", -time.Minute)
	insertRow(t, db, table, p+"/released", "", -time.Minute)

	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{dialect.NotifyChannel(table)}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	r, err := reaper.New(db.DB, db.Dialect, reaper.WithTable(table), reaper.WithGrace(0))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Sweep(ctx); err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2 rows", n, err)
	}
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != p+"/dead" {
		t.Errorf("notified %q, want the crashed holder's key %q", n.Payload, p+"/dead")
	}
	// The released row (no owner) had its waiters woken at release: no second notification.
	short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if extra, err := conn.WaitForNotification(short); err == nil {
		t.Errorf("unexpected notification for %q", extra.Payload)
	}
}

func TestRunStopsWithContextAndLogs(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	table := scratchTable(t, db)
	insertRow(t, db, table, locktest.Key(t), "gone", -time.Minute)
	buf := &syncWriter{w: &strings.Builder{}}
	logger := slog.New(slog.NewTextHandler(buf, nil))
	r, err := reaper.New(db.DB, db.Dialect, reaper.WithTable(table), reaper.WithInterval(20*time.Millisecond), reaper.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil on cancel", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
	if !strings.Contains(buf.String(), "sqllock.rows=1") {
		t.Errorf("log does not report the deleted row: %q", buf.String())
	}
}

func TestBadOptions(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	for name, opt := range map[string]reaper.Option{
		"table injection": reaper.WithTable("locks; DROP TABLE x"),
		"zero interval":   reaper.WithInterval(0),
		"zero batch":      reaper.WithBatchSize(0),
		"negative grace":  reaper.WithGrace(-time.Second),
		"nil logger":      reaper.WithLogger(nil),
	} {
		if _, err := reaper.New(db.DB, db.Dialect, opt); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := reaper.New((*sql.DB)(nil), sqllock.SQLite); err == nil {
		t.Error("New(nil) succeeded")
	}
}
