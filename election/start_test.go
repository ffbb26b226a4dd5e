package election_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// linkDelay is the observer's link in TestObserveStartRace.
const linkDelay = 40 * time.Millisecond

// TestObserveStartRace: an observer behind a 40ms link calls Observe while
// a campaigner on a direct link takes office, at 21 offsets spanning
// Observe's start. Each time Observe delivers that leader (not the one
// before it, already resigned), then the next one, each once and in
// order. A leader who takes office between two reads of Observe's start
// would be taken for delivered and never be.
func TestObserveStartRace(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		obs := newElection(t, delayedLink(t, db))
		camp := newElection(t, db)

		// Warm the observer's pool, statements and listener, then time
		// an Observe's start to place the campaigns across it.
		var took time.Duration
		for range 3 {
			octx, ocancel := context.WithCancel(ctx)
			began := time.Now()
			if _, err := obs.Observe(octx, locktest.Key(t)); err != nil {
				t.Fatal(err)
			}
			took = time.Since(began)
			ocancel()
		}
		t.Logf("Observe starts in %v behind the %v link", took, linkDelay)

		const offsets = 21
		var missed []string
		for i := range offsets {
			off := took * time.Duration(i) / (offsets - 1) * 5 / 4
			name := locktest.Key(t)
			past, err := camp.Campaign(ctx, name, "past")
			if err != nil {
				t.Fatal(err)
			}
			if err := past.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			octx, ocancel := context.WithCancel(ctx)
			type started struct {
				seen <-chan election.Leader
				err  error
			}
			start := make(chan started, 1)
			go func() {
				seen, err := obs.Observe(octx, name)
				start <- started{seen, err}
			}()
			time.Sleep(off)
			first, err := camp.Campaign(ctx, name, "first")
			if err != nil {
				t.Fatal(err)
			}
			s := <-start
			if s.err != nil {
				t.Fatal(s.err)
			}
			next := func() (election.Leader, bool) {
				select {
				case ld := <-s.seen:
					return ld, true
				case <-time.After(3 * time.Second):
					return election.Leader{}, false
				}
			}
			ld, ok := next()
			switch {
			case !ok:
				missed = append(missed, fmt.Sprintf("offset %v: term %d (in office) never delivered", off.Round(time.Millisecond), first.Term()))
			case ld.Term != first.Term() || ld.Value != "first":
				t.Fatalf("offset %v: Observe delivered term %d %q first, want the current leader's %d (the past one was %d)", off, ld.Term, ld.Value, first.Term(), past.Term())
			}
			if err := first.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			second, err := camp.Campaign(ctx, name, "second")
			if err != nil {
				t.Fatal(err)
			}
			if ld, ok := next(); !ok || ld.Term != second.Term() || ld.Value != "second" {
				t.Fatalf("offset %v: after term %d Observe delivered %+v (%v), want term %d", off, first.Term(), ld, ok, second.Term())
			}
			select {
			case ld := <-s.seen:
				t.Fatalf("offset %v: Observe delivered term %d again after term %d", off, ld.Term, second.Term())
			case <-time.After(250 * time.Millisecond):
			}
			if err := second.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			ocancel()
			for range s.seen {
			}
		}
		if len(missed) > 0 {
			t.Errorf("%d of %d leaders who took office while Observe started were never delivered:", len(missed), offsets)
			for _, m := range missed {
				t.Error(m)
			}
		}
	})
}

// delayedLink returns a handle on db's database whose every statement
// crosses a link of linkDelay: a toxiproxy latency on what the server
// sends; on SQLite, which has no network, a driver that holds each
// statement that long before the database sees it.
func delayedLink(t *testing.T, db *testdb.DB) *testdb.DB {
	t.Helper()
	if db.Dialect != sqllock.SQLite {
		x := testdb.NewToxi(t, db.Dialect)
		x.Add(t, "latency", "latency", "downstream", map[string]any{"latency": linkDelay.Milliseconds()})
		return x.DB
	}
	slow := sql.OpenDB(slowConnector{drv: db.DB.Driver(), dsn: db.DSN})
	t.Cleanup(func() { slow.Close() })
	return &testdb.DB{DB: slow, Dialect: db.Dialect, Driver: db.Driver, DSN: db.DSN}
}

// slowConnector opens connections whose statements wait linkDelay before
// they run.
type slowConnector struct {
	drv driver.Driver
	dsn string
}

func (c slowConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return slowConn{conn}, nil
}

func (c slowConnector) Driver() driver.Driver { return c.drv }

type slowConn struct{ driver.Conn }

func wait(ctx context.Context) error {
	t := time.NewTimer(linkDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c slowConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if err := wait(ctx); err != nil {
		return nil, err
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c slowConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if err := wait(ctx); err != nil {
		return nil, err
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c slowConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := wait(ctx); err != nil {
		return nil, err
	}
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}
