package optimistic_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

const (
	stockUnits   = 10_000
	stockProcs   = 2
	stockWorkers = 64
	stockStripes = 16
	envStock     = "OPTIMISTIC_STOCK_CHILD" // dialect:mode:table in a child
)

var errSoldOut = errors.New("sold out")

// buyPolicy keeps retrying a contended row: the loop is bounded by the
// test's context, and a buyer whose attempts run out simply tries again.
var buyPolicy = optimistic.LimitAttempts(optimistic.ExponentialBackoff(50*time.Microsecond, 2*time.Millisecond), 50)

// TestStock: 10,000 units, 64 goroutines in each of two processes buying
// until sold out. Exactly 10,000 purchases succeed and the stock ends at
// zero, never below, with the CAS on one row and with striped counters.
func TestStock(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process stock test")
	}
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		// The dialects are separate servers (and a separate file): they run
		// side by side. The two modes of one dialect do not, so that each
		// measures its own contention, and SQLite's single writer is not
		// shared.
		t.Parallel()
		for _, mode := range []string{"cas", "striped"} {
			t.Run(mode, func(t *testing.T) {
				ctx := ctxT(t)
				var table string
				switch mode {
				case "cas":
					table = stockTable(t, db, stockUnits)
				case "striped":
					table = counterTable(t, db)
					c, err := optimistic.NewCounter(db.DB, db.Dialect, table, stockStripes)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					if err := c.Set(ctx, "stock", stockUnits); err != nil {
						t.Fatal(err)
					}
				}
				begin := time.Now()
				type result struct {
					out []byte
					err error
				}
				results := make(chan result, stockProcs)
				for range stockProcs {
					cmd := testdb.Child(t, "TestStockChild", envStock+"="+db.Dialect.String()+":"+mode+":"+table)
					go func() {
						out, err := cmd.CombinedOutput()
						results <- result{out, err}
					}()
				}
				var bought, conflicts int64
				for range stockProcs {
					r := <-results
					if r.err != nil {
						t.Fatalf("child: %v\n%s", r.err, r.out)
					}
					b, c, ok := parseChild(r.out)
					if !ok {
						t.Fatalf("child printed no result:\n%s", r.out)
					}
					bought += b
					conflicts += c
				}
				elapsed := time.Since(begin)
				if bought != stockUnits {
					t.Errorf("%d purchases succeeded, want exactly %d", bought, stockUnits)
				}
				var left, lowest int64
				q := "SELECT COALESCE(SUM(qty), 0), COALESCE(MIN(qty), 0) FROM " + table
				if err := db.QueryRowContext(ctx, q).Scan(&left, &lowest); err != nil {
					t.Fatal(err)
				}
				if left != 0 || lowest < 0 {
					t.Errorf("stock ends at %d (lowest row %d), want 0 and never negative", left, lowest)
				}
				t.Logf("%v %s: %d purchases by %d×%d buyers in %v (%.0f/s), %d conflicts retried",
					db.Dialect, mode, bought, stockProcs, stockWorkers, elapsed.Round(time.Millisecond), float64(bought)/elapsed.Seconds(), conflicts)
			})
		}
	})
}

// counterTable creates a striped counter table dropped when the test ends.
func counterTable(t testing.TB, db *testdb.DB) string {
	t.Helper()
	name := uniqueName("opt_ctr")
	ddl, err := optimistic.CounterSchema(db.Dialect, name)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, db, ddl)
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE "+name) })
	return name
}

func parseChild(out []byte) (bought, conflicts int64, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "BOUGHT" && f[2] == "CONFLICTS" {
			b, err1 := strconv.ParseInt(f[1], 10, 64)
			c, err2 := strconv.ParseInt(f[3], 10, 64)
			return b, c, err1 == nil && err2 == nil
		}
	}
	return 0, 0, false
}

// TestStockChild is one buying process of TestStock.
func TestStockChild(t *testing.T) {
	spec := os.Getenv(envStock)
	if spec == "" {
		t.Skip("child of TestStock")
	}
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) != 3 {
		t.Fatalf("bad %s=%q", envStock, spec)
	}
	d, err := sqllock.ParseDialect(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	mode, table := parts[1], parts[2]
	// A pool smaller than the buyers, as in a real service: SQLite gets one
	// connection per process, since it has one writer at a time anyway.
	conns := 16
	if d == sqllock.SQLite {
		conns = 1
	}
	db := testdb.Fresh(t, d, conns)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	var buy func(ctx context.Context) (conflicts int, err error)
	switch mode {
	case "cas":
		tb, err := optimistic.NewTable(d, table, "id", "version")
		if err != nil {
			t.Fatal(err)
		}
		defer tb.Close()
		buy = func(ctx context.Context) (int, error) {
			tries := 0
			_, err := optimistic.Modify(ctx, db.DB, tb, 1, buyPolicy, func(it *item) error {
				tries++
				if it.Qty <= 0 {
					return errSoldOut
				}
				it.Qty--
				return nil
			})
			return tries - 1, err
		}
	case "striped":
		c, err := optimistic.NewCounter(db.DB, d, table, stockStripes)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		buy = func(ctx context.Context) (int, error) {
			err := c.Take(ctx, "stock")
			if errors.Is(err, optimistic.ErrSoldOut) {
				return 0, errSoldOut
			}
			return 0, err
		}
	default:
		t.Fatalf("unknown mode %q", mode)
	}

	var bought, conflicts atomic.Int64
	var wg sync.WaitGroup
	for range stockWorkers {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := buy(ctx)
				conflicts.Add(int64(c))
				switch {
				case err == nil:
					bought.Add(1)
				case errors.Is(err, errSoldOut):
					return
				case errors.Is(err, sqllock.ErrConflict):
					// Out of attempts on a hot row: queue up again.
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("buyers ran out of time")
	}
	fmt.Printf("BOUGHT %d CONFLICTS %d\n", bought.Load(), conflicts.Load())
}
