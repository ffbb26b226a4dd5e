package stmtcache

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyNoLeaks(m) }

func TestReuseAndClose(t *testing.T) {
	db := testdb.Fresh(t, sqllock.SQLite, 0)
	ctx := context.Background()
	var c Cache
	const q = `SELECT ?1 + 1`
	for i := range 3 {
		var got int
		if err := c.QueryRow(ctx, db.DB, q, []any{i}, &got); err != nil {
			t.Fatal(err)
		}
		if got != i+1 {
			t.Fatalf("got %d, want %d", got, i+1)
		}
	}
	if c.Len() != 1 {
		t.Fatalf("%d statements cached for one query, want 1", c.Len())
	}

	// Rows opened before Close stay readable after it.
	rows, err := c.Query(ctx, db.DB, `SELECT value FROM json_each('[1,2,3]')`)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 0 {
		t.Fatalf("%d statements cached after Close", c.Len())
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil || n != 3 {
		t.Fatalf("rows opened before Close: %d read, err %v; want 3, nil", n, err)
	}
	rows.Close()

	// After Close statements still run, prepared for one use.
	var got int
	if err := c.QueryRow(ctx, db.DB, q, []any{41}, &got); err != nil || got != 42 {
		t.Fatalf("after Close: got %d, %v; want 42, nil", got, err)
	}
	if c.Len() != 0 {
		t.Fatal("a statement was cached after Close")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Close while statements run: none of them fails with "statement is
// closed", and the server is left with no prepared statement of the cache.
func TestCloseUnderUse(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.MariaDB, sqllock.SQLite} {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Fresh(t, d, 1) // one session, so its counters are ours
			ctx := context.Background()
			q := `SELECT ? + 0`
			before := openStmts(t, db)
			var c Cache
			var wg sync.WaitGroup
			errs := make(chan error, 400)
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 50 {
						var got int
						if err := c.QueryRow(ctx, db.DB, q, []any{g*100 + i}, &got); err != nil {
							errs <- err
						}
						if g == 3 && i == 10 {
							c.Close()
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("statement around Close: %v", err)
			}
			if after := openStmts(t, db); after != before {
				t.Fatalf("server-side statements open on the session: %d before, %d after Close", before, after)
			}
		})
	}
}

// openStmts counts the prepared statements open on db's one MariaDB
// session; -1 where the server cannot tell.
func openStmts(t *testing.T, db *testdb.DB) int {
	t.Helper()
	if !db.Dialect.IsMySQL() {
		return -1
	}
	var name string
	var prep, closed int
	row := func(v string, dst *int) {
		if err := db.QueryRow(`SHOW SESSION STATUS LIKE '`+v+`'`).Scan(&name, dst); err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
	}
	row("Com_stmt_prepare", &prep)
	row("Com_stmt_close", &closed)
	return prep - closed
}

// slowPreparer prepares on db once gate is closed, counting the calls.
type slowPreparer struct {
	db   *sql.DB
	gate chan struct{}
	n    atomic.Int32
}

func (p *slowPreparer) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	p.n.Add(1)
	select {
	case <-p.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.db.PrepareContext(ctx, query)
}

// Callers that ask for one query at once share one prepare. A second
// prepare's statement would have to be closed again, and closing a
// statement waits for every connection it was prepared on to finish its
// current call: a caller closing it under the cache's lock, while that
// connection waits on a row lock whose holder needs the cache to give its
// statement back, deadlocked rowlock's Acquire.
func TestConcurrentCallersPrepareOnce(t *testing.T) {
	db := testdb.Fresh(t, sqllock.SQLite, 0)
	p := &slowPreparer{db: db.DB, gate: make(chan struct{})}
	var c Cache
	defer c.Close()
	ctx := context.Background()
	const callers = 8
	sts := make(chan *sql.Stmt, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			st, done, err := c.Stmt(ctx, p, `SELECT 1`)
			if err != nil {
				t.Error(err)
				return
			}
			defer done()
			sts <- st
		})
	}
	time.Sleep(50 * time.Millisecond) // every caller is preparing or waiting
	close(p.gate)
	wg.Wait()
	close(sts)
	if n := p.n.Load(); n != 1 {
		t.Errorf("%d callers of one query prepared it %d times, want once", callers, n)
	}
	first := <-sts
	for st := range sts {
		if st != first {
			t.Fatal("callers of one query got different statements")
		}
	}
	if c.Len() != 1 {
		t.Fatalf("%d statements cached, want 1", c.Len())
	}
}

// A caller waiting for another's prepare gives up when its context ends;
// a failed prepare is not shared: the next caller prepares again.
func TestWaitForPrepare(t *testing.T) {
	db := testdb.Fresh(t, sqllock.SQLite, 0)
	p := &slowPreparer{db: db.DB, gate: make(chan struct{})}
	var c Cache
	defer c.Close()
	first := make(chan error, 1)
	go func() {
		_, done, err := c.Stmt(context.Background(), p, `SELECT 1`)
		if err == nil {
			done()
		}
		first <- err
	}()
	for p.n.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := c.Stmt(ctx, p, `SELECT 1`); err != context.DeadlineExceeded {
		t.Fatalf("Stmt waiting past its deadline = %v, want DeadlineExceeded", err)
	}
	close(p.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Stmt(context.Background(), db.DB, `SELECT syntax error`); err == nil {
		t.Fatal("a bad statement prepared")
	}
	if _, _, err := c.Stmt(context.Background(), db.DB, `SELECT syntax error`); err == nil {
		t.Fatal("a bad statement prepared the second time")
	}
	if c.Len() != 1 {
		t.Fatalf("%d statements cached, want 1", c.Len())
	}
}
