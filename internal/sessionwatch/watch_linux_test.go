//go:build linux

package sessionwatch

import (
	"context"
	"database/sql/driver"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// TestBusy: data that arrives on the socket while the watch is Busy does
// not wake the watcher, and is looked at once Idle; a kill of the session
// while Busy is still reported. The data is a notification the connection
// listens for, which nothing reads while the connection is idle (an answer
// to a statement is read by the driver, often before the watcher looks).
func TestBusy(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Killed at the end: never back to the pool.
	defer c.Raw(func(any) error { return driver.ErrBadConn })
	var pid int64
	if err := c.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	channel := fmt.Sprintf("sessionwatch_%d", pid)
	if _, err := c.ExecContext(ctx, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}
	fired := make(chan struct{}, 1)
	w := Conn(c, func() { fired <- struct{}{} })
	if w == nil {
		t.Fatal("no watch on a pgx connection")
	}
	defer w.Stop()
	// Events are handled by the watcher's goroutine, a moment later.
	settle := func() int64 {
		time.Sleep(200 * time.Millisecond)
		return looks.Load()
	}

	w.Busy()
	before := looks.Load()
	if _, err := db.ExecContext(ctx, "NOTIFY "+channel); err != nil {
		t.Fatal(err)
	}
	if n := settle() - before; n != 0 {
		t.Errorf("data arriving while busy woke the watcher %d times, want 0", n)
	}
	before = looks.Load()
	w.Idle()
	if n := settle() - before; n == 0 {
		t.Errorf("data that came while busy was not looked at once idle")
	}

	w.Busy()
	if _, err := db.ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("a kill while busy was not reported")
	}
}
