package tablelock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/tablelock"
)

// slowDial is a connector whose every new connection takes d first: a
// server slow to start sessions, as a loaded one is.
type slowDial struct {
	driver.Connector
	d time.Duration
}

func (s slowDial) Connect(ctx context.Context) (driver.Conn, error) {
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Connector.Connect(ctx)
}

// TestFairBurstOnFreshKey: fair Lockers, each on a fresh pool of its own
// (as processes are) whose connections take a second to open, all start
// at once on a key nobody has taken, and each takes and gives back the
// key until the run ends, every Acquire cut off at its end (the bench's
// hot key). The key is free: the first holder comes one dial after the
// start, not two (the listening session's, then the take's), and every
// client is served within the run.
func TestFairBurstOnFreshKey(t *testing.T) {
	db, table, _ := fairTable(t)
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithFairness(true)}
	const clients, dial, run = 8, time.Second, 4 * time.Second
	cfg, err := pgx.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	lockers := make([]*tablelock.Locker, clients)
	for i := range lockers {
		pdb := sql.OpenDB(slowDial{stdlib.GetConnector(*cfg), dial})
		t.Cleanup(func() { pdb.Close() })
		l, err := tablelock.New(pdb, sqllock.Postgres, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		lockers[i] = l
	}
	key := locktest.Key(t)
	start := time.Now()
	stop := start.Add(run)
	var mu sync.Mutex
	first := make([]time.Duration, clients) // 0: never served
	var wg sync.WaitGroup
	for i, l := range lockers {
		wg.Go(func() {
			for time.Now().Before(stop) {
				ctx, cancel := context.WithDeadline(context.Background(), stop)
				lease, err := l.Acquire(ctx, key)
				cancel()
				if err != nil {
					return
				}
				mu.Lock()
				if first[i] == 0 {
					first[i] = time.Since(start)
				}
				mu.Unlock()
				if err := lease.Release(context.Background()); err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	earliest, served := time.Duration(0), 0
	for _, d := range first {
		if d > 0 {
			served++
			if earliest == 0 || d < earliest {
				earliest = d
			}
		}
	}
	t.Logf("each client's first turn, after the start: %v", first)
	if earliest == 0 || earliest >= 2*dial {
		t.Errorf("the free key's first holder came %v after the start; want within two dials (%v), one being the take's own", earliest.Round(time.Millisecond), 2*dial)
	}
	if served < clients {
		t.Errorf("%d of %d clients served within %v", served, clients, run)
	}
}
