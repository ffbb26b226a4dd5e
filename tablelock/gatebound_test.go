package tablelock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// gateDriver serves MariaDB through go-sql-driver/mysql, and watches the
// gate statements that go through it: it counts the waits and the
// session id lookups, and holds each wait back in the client for delay
// before it sends it, saying so on sent.
type gateDriver struct {
	delay     time.Duration
	sent      chan struct{}
	waits, id atomic.Int64
}

// slowGate holds waits back: a wait whose statement has not reached the
// server yet when its context ends. countGate only counts.
var (
	slowGate  = &gateDriver{delay: 300 * time.Millisecond, sent: make(chan struct{}, 1)}
	countGate = &gateDriver{}
)

func init() {
	sql.Register("sqllock-test-slow-gate", slowGate)
	sql.Register("sqllock-test-count-gate", countGate)
}

func (d *gateDriver) Open(dsn string) (driver.Conn, error) {
	c, err := mysql.MySQLDriver{}.Open(dsn)
	if err != nil {
		return nil, err
	}
	return &gateConn{c, d}, nil
}

// gateConn forwards everything database/sql asks of a mysql connection.
type gateConn struct {
	driver.Conn
	d *gateDriver
}

// isWait reports the gate's wait statement.
func isWait(q string) bool { return strings.HasPrefix(q, "SELECT GET_LOCK(?, ?), RELEASE_LOCK(?)") }

// wait counts a wait and holds it back for the driver's delay.
func (d *gateDriver) wait() {
	d.waits.Add(1)
	if d.sent != nil {
		select {
		case d.sent <- struct{}{}:
		default:
		}
	}
	time.Sleep(d.delay)
}

func (c *gateConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	switch {
	case isWait(q):
		c.d.wait()
	case q == "SELECT CONNECTION_ID()":
		c.d.id.Add(1)
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

// gateStmt is a prepared wait statement, held back when it runs.
type gateStmt struct {
	driver.Stmt
	d *gateDriver
}

func (s *gateStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.d.wait()
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

func (s *gateStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (c *gateConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *gateConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil || !isWait(q) {
		return st, err
	}
	return &gateStmt{st, c.d}, nil
}

func (c *gateConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, o)
}

func (c *gateConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *gateConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *gateConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

func (c *gateConn) CheckNamedValue(v *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

// driverLog counts what the mysql driver logs.
type driverLog struct {
	n     atomic.Int64
	first atomic.Value // string
}

func (l *driverLog) Print(v ...any) {
	if l.n.Add(1) == 1 {
		l.first.Store(fmt.Sprint(v...))
	}
}

// TestGateCancelBeforeWaitReachesServer (F2): a waiter's context that
// ends before its gate wait's statement reaches the server ends the
// Acquire within a bound, not when the holder's lease runs out. The
// holder keeps its key for the whole test (TTL 5s, renewed), so a wait
// that missed its cancel blocks for the lease's remaining seconds.
func TestGateCancelBeforeWaitReachesServer(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	table := privateTable(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	holder := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(5*time.Second))
	slow := []tablelock.Option{tablelock.WithTable(table), tablelock.WithMaxBackoff(time.Minute)}

	t.Run("statement held back in the client", func(t *testing.T) {
		key := locktest.Key(t)
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Release(ctx)
		eventually(t, "the holder keeps its gate", func() bool { return gateKept(t, db, table, key) })
		sdb, err := sql.Open("sqllock-test-slow-gate", db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		waiter, err := tablelock.New(sdb, sqllock.MariaDB, slow...)
		if err != nil {
			t.Fatal(err)
		}
		defer waiter.Close()
		for range 3 {
			select {
			case <-slowGate.sent:
			default:
			}
			wctx, wcancel := context.WithCancel(ctx)
			got := make(chan error, 1)
			go func() {
				_, err := waiter.Acquire(wctx, key)
				got <- err
			}()
			select {
			case <-slowGate.sent:
			case <-time.After(20 * time.Second):
				wcancel()
				t.Fatal("the waiter never waited on the gate")
			}
			wcancel()
			start := time.Now()
			err := <-got
			took := time.Since(start)
			if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Acquire = %v, want ErrNotAcquired and context.Canceled", err)
			}
			t.Logf("cancelled Acquire returned %v after its cancel", took.Round(time.Millisecond))
			if took > 1500*time.Millisecond {
				t.Fatalf("a cancel that came before the gate wait reached the server returned after %v, want within 1.5s", took.Round(time.Millisecond))
			}
		}
		eventually(t, "no gate wait left on the server", func() bool { return gateWaits(t, db) == 0 })
	})

	t.Run("cancels swept over 0-5ms", func(t *testing.T) {
		key := locktest.Key(t)
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Release(ctx)
		eventually(t, "the holder keeps its gate", func() bool { return gateKept(t, db, table, key) })
		// The driver logs a connection that broke under it: a cancel
		// must not fill the application's log. A pool keeps the logger
		// set when it was opened.
		var complaints driverLog
		_ = mysql.SetLogger(&complaints)
		waiter := newLocker(t, testdb.Fresh(t, sqllock.MariaDB, 0), slow...)
		_ = mysql.SetLogger(log.New(os.Stderr, "[mysql] ", log.Ldate|log.Ltime|log.Lshortfile))
		const rounds = 300
		var late []string
		var worst time.Duration
		for i := range rounds {
			wctx, wcancel := context.WithCancel(ctx)
			got := make(chan error, 1)
			go func() {
				_, err := waiter.Acquire(wctx, key)
				got <- err
			}()
			time.Sleep(time.Duration(rand.N(5000)) * time.Microsecond)
			wcancel()
			start := time.Now()
			err := <-got
			took := time.Since(start)
			if !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Fatalf("round %d: cancelled Acquire = %v, want ErrNotAcquired", i, err)
			}
			worst = max(worst, took)
			if took > 1500*time.Millisecond {
				late = append(late, fmt.Sprintf("round %d: %v", i, took.Round(time.Millisecond)))
			}
		}
		t.Logf("%d cancels, longest return after the cancel %v", rounds, worst.Round(time.Millisecond))
		if n := complaints.n.Load(); n > 0 {
			t.Errorf("%d cancels made the driver log %d broken connections, the first: %s", rounds, n, complaints.first.Load())
		}
		if len(late) > 0 {
			t.Fatalf("%d of %d cancelled Acquires returned more than 1.5s after their cancel: %s", len(late), rounds, strings.Join(late, ", "))
		}
		eventually(t, "no gate wait left on the server", func() bool { return gateWaits(t, db) == 0 })
	})
}

// TestGateForceReleasedHolder (F3): after an operator's ForceRelease, the
// old holder does not learn of it before its next renewal (TTL/3, 10s
// here) and keeps its key's gate until then. The next holder cannot take
// that gate, so a waiter blocks on the old holder's; it must still get the
// key soon after the next holder's release, not at the old holder's
// renewal.
func TestGateForceReleasedHolder(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	table := privateTable(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(30 * time.Second)}
	old := newLocker(t, testdb.Fresh(t, sqllock.MariaDB, 0), opts...)
	next := newLocker(t, testdb.Fresh(t, sqllock.MariaDB, 0), opts...)
	operator := newLocker(t, db, opts...)
	waiter := newLocker(t, testdb.Fresh(t, sqllock.MariaDB, 0), tablelock.WithTable(table), tablelock.WithMaxBackoff(time.Minute))
	key := locktest.Key(t)

	a, err := old.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	eventually(t, "the holder keeps its gate", func() bool { return gateKept(t, db, table, key) })
	if freed, err := operator.ForceRelease(ctx, key, a.Token(), tablelock.Reason("TestGateForceReleasedHolder")); err != nil || !freed {
		t.Fatalf("ForceRelease = %v, %v", freed, err)
	}
	b, err := next.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // older than a gate's 2ms: the waiter blocks on it
	got := make(chan time.Time, 1)
	go func() {
		l, err := waiter.Acquire(ctx, key)
		if err != nil {
			t.Error(err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		l.Release(ctx)
	}()
	eventually(t, "the waiter blocks on the gate", func() bool { return gateWaits(t, db) >= 1 })
	time.Sleep(100 * time.Millisecond)
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	select {
	case at := <-got:
		if at.IsZero() {
			t.FailNow()
		}
		took := at.Sub(released)
		t.Logf("the waiter got the key %v after the next holder's release", took.Round(time.Millisecond))
		if took > 3*time.Second {
			t.Fatalf("the waiter slept %v with the key free (the old holder kept the gate), want within 3s", took.Round(time.Millisecond))
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the waiter never got the key")
	}
}

// TestGatesShareCappedPool (F6): Lockers sharing one pool capped at 4
// connections leave room for each other's takes, renewals and releases:
// their gates draw on one budget for the pool, not one each. Each Locker
// holds a key for more than two TTLs, with a waiter in the next Locker;
// no lease is lost, every release is quick and every waiter is served.
func TestGatesShareCappedPool(t *testing.T) {
	db := testdb.Fresh(t, sqllock.MariaDB, 4)
	table := privateTable(t, testdb.Open(t, sqllock.MariaDB))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 4
	const ttl = 3 * time.Second
	lockers := make([]*tablelock.Locker, n)
	keys := make([]string, n)
	for i := range lockers {
		lockers[i] = newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(ttl))
		keys[i] = fmt.Sprintf("%s/%d", locktest.Key(t), i)
	}
	leases := make([]sqllock.Lease, n)
	for i := range lockers {
		l, err := lockers[i].Acquire(ctx, keys[i])
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	// Each Locker waits for the key of the one before it.
	var wg sync.WaitGroup
	waited := make([]error, n)
	for i := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := lockers[i].Acquire(ctx, keys[(i+n-1)%n])
			if err == nil {
				err = l.Release(ctx)
			}
			waited[i] = err
		}()
	}
	time.Sleep(2*ttl + ttl/2)
	for i, l := range leases {
		if err := l.Err(); err != nil {
			t.Errorf("lease %d lost while its Locker shared a pool of 4 with %d others: %v", i, n-1, err)
		}
	}
	for i, l := range leases {
		start := time.Now()
		err := l.Release(ctx)
		took := time.Since(start)
		t.Logf("release %d took %v", i, took.Round(time.Millisecond))
		if err != nil {
			t.Errorf("release %d: %v", i, err)
		}
		if took > time.Second {
			t.Errorf("release %d took %v on a pool of 4 shared by %d Lockers, want well under 1s", i, took.Round(time.Millisecond), n)
		}
	}
	wg.Wait()
	for i, err := range waited {
		if err != nil {
			t.Errorf("waiter %d: %v", i, err)
		}
	}
}

// TestGateWaitBounded: a waiter blocked on a gate whose holder keeps its
// key for longer than the test ends each wait by itself within the bound
// (1s) and looks at the row again: about one wait a second, each on a
// pooled session whose id is looked up once, not once per wait.
func TestGateWaitBounded(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	table := privateTable(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(time.Minute))
	key := locktest.Key(t)
	a, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	eventually(t, "the holder keeps its gate", func() bool { return gateKept(t, db, table, key) })
	cdb, err := sql.Open("sqllock-test-count-gate", db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	waiter, err := tablelock.New(cdb, sqllock.MariaDB, tablelock.WithTable(table), tablelock.WithMaxBackoff(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	const wait = 5 * time.Second
	wctx, wcancel := context.WithTimeout(ctx, wait)
	defer wcancel()
	if _, err := waiter.Acquire(wctx, key); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire of a held key = %v, want its deadline", err)
	}
	waits, ids := countGate.waits.Load(), countGate.id.Load()
	t.Logf("in %v: %d gate waits, %d session id lookups", wait, waits, ids)
	if waits < 3 || waits > 10 {
		t.Errorf("%d gate waits in %v, want about one a second: each ends by itself within the bound", waits, wait)
	}
	if ids > 2 {
		t.Errorf("%d session id lookups for %d waits, want one per pooled session", ids, waits)
	}
}
