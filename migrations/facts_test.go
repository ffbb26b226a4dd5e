package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/semaphore"
)

// TestSizesAndSchedule (migration 00017): Up makes the tables where a
// Semaphore writes its keys' permit counts and Loop its jobs' next
// firings, and the Semaphore writes there, the last count declared
// winning; Down takes both tables away and nothing else; Up makes them
// again.
func TestSizesAndSchedule(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Scratch(t, d)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := migrations.Up(ctx, db.DB, d); err != nil {
				t.Fatal(err)
			}
			for _, table := range []string{semaphore.SizesTable, jobguard.ScheduleTable} {
				if !hasTable(t, db, table) {
					t.Fatalf("Up did not create %s", table)
				}
			}
			sem, err := semaphore.New(db.DB, d)
			if err != nil {
				t.Fatal(err)
			}
			defer sem.Close()
			for _, n := range []int{3, 5} {
				p, err := sem.Acquire(ctx, "exports", n)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Release(ctx); err != nil {
					t.Fatal(err)
				}
				var got int
				if err := db.QueryRowContext(ctx, "SELECT permits FROM "+semaphore.SizesTable).Scan(&got); err != nil || got != n {
					t.Fatalf("after a permit of %d: %s says %d, %v", n, semaphore.SizesTable, got, err)
				}
			}

			p, err := migrations.NewProvider(db.DB, d)
			if err != nil {
				t.Fatal(err)
			}
			// Down to 16: later migrations go first, then 00017.
			res, err := p.DownTo(ctx, 16)
			if err != nil || len(res) == 0 || res[len(res)-1].Source.Version != 17 {
				t.Fatalf("DownTo 16: %v, %v; want 00017 undone last", res, err)
			}
			for _, table := range []string{semaphore.SizesTable, jobguard.ScheduleTable} {
				if hasTable(t, db, table) {
					t.Errorf("%s survived 00017's Down", table)
				}
			}
			if !hasTable(t, db, semaphore.DefaultTable) {
				t.Errorf("00017's Down dropped %s", semaphore.DefaultTable)
			}
			if err := migrations.Up(ctx, db.DB, d); err != nil || !hasTable(t, db, semaphore.SizesTable) {
				t.Fatalf("Up after Down: %v", err)
			}
		})
	}
}
