package jobguard_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
)

// TestPgBouncer: Guards made WithTransactionPooler on two pools through
// PgBouncer in transaction mode (two services' clients on the proxy's
// shared server sessions) run each job exactly once and list it, with no
// error. Without the option List's prepared statements collide on a
// server session ("prepared statement ... already exists") or are missing
// on the next turn ("does not exist"); a run's statements go through pgx
// itself, unprepared by the DSN's default_query_exec_mode=exec.
func TestPgBouncer(t *testing.T) {
	db := testdb.PgBouncer(t)
	ctx, table := ctxT(t), jobTable(t, db)
	const pools, perPool, rounds = 2, 4, 10
	var guards []*jobguard.Guard
	for range pools {
		p, err := sql.Open("pgx", db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		for range perPool {
			g, err := jobguard.New(p, db.Dialect, jobguard.WithTable(table), jobguard.WithTransactionPooler())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			guards = append(guards, g)
		}
	}
	for round := range rounds {
		// AtLeast keeps the job after its run's Release, so a replica
		// that fires late skips it.
		job := jobguard.Job{Name: fmt.Sprintf("%s/%d", locktest.Key(t), round), AtMost: time.Minute, AtLeast: 30 * time.Second}
		var ran atomic.Int32
		var wg sync.WaitGroup
		for _, g := range guards {
			wg.Go(func() {
				if _, err := g.Run(ctx, job, func(context.Context) error {
					ran.Add(1)
					time.Sleep(5 * time.Millisecond)
					return nil
				}); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		wg.Wait()
		if got := ran.Load(); got != 1 {
			t.Fatalf("round %d: %d of %d replicas ran the job, want exactly 1", round, got, len(guards))
		}
		// List, as an operator's tool runs it, from every Guard at once.
		for _, g := range guards {
			wg.Go(func() {
				jobs, err := g.List(ctx)
				if err != nil {
					t.Errorf("round %d: %v", round, err)
				}
				if !slices.ContainsFunc(jobs, func(j jobguard.Info) bool { return j.Key == job.Name }) {
					t.Errorf("round %d: List %+v lacks the job %q", round, jobs, job.Name)
				}
			})
		}
		wg.Wait()
	}
}
