package jobguard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
)

// Two replicas fire a job three times each: one run per firing window
// is recorded as a run, every other firing as skipped, and a force
// release as such; the job name is an attribute, the key is not.
func TestMetrics(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, table := ctxT(t), jobTable(t, db)
		r := locktest.NewReader(t)
		guards := make([]*jobguard.Guard, 2)
		for i := range guards {
			g, err := jobguard.New(db.DB, db.Dialect, jobguard.WithTable(table), jobguard.WithMeterProvider(r.MP))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			guards[i] = g
		}
		job := jobguard.Job{Name: locktest.Key(t), AtMost: time.Minute}
		runs, skips := 0, 0
		for range 3 {
			// The first replica holds the job while the second fires.
			ran, err := guards[0].Run(ctx, job, func(ctx context.Context) error {
				ok, err := guards[1].Run(ctx, job, func(context.Context) error { return errors.New("ran twice") })
				if ok || err != nil {
					t.Errorf("second replica: ran=%v err=%v, want skipped", ok, err)
				}
				skips++
				return nil
			})
			if !ran || err != nil {
				t.Fatalf("first replica: ran=%v err=%v", ran, err)
			}
			runs++
		}
		lease, err := guards[0].TryAcquire(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if freed, err := guards[1].ForceRelease(ctx, job.Name, lease.Token()); !freed || err != nil {
			t.Fatalf("ForceRelease: %v, %v", freed, err)
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Release after ForceRelease: %v, want ErrLockLost", err)
		}
		rm := r.Collect(t)
		named := []attribute.KeyValue{attribute.String("sqllock.strategy", "jobguard"), attribute.String("sqllock.job", job.Name)}
		for name, want := range map[string]int64{
			"sqllock.jobguard.runs":     int64(runs),
			"sqllock.jobguard.skipped":  int64(skips),
			"sqllock.jobguard.duration": int64(runs),
		} {
			if got := locktest.Count(rm, name, named...); got != want {
				t.Errorf("%s = %d, want %d", name, got, want)
			}
		}
		strategy := attribute.String("sqllock.strategy", "jobguard")
		for name, want := range map[string]int64{
			"sqllock.lock.force_released": 1,
			"sqllock.lease.lost":          1,
			"sqllock.lease.active":        0,
		} {
			if got := locktest.Count(rm, name, strategy); got != want {
				t.Errorf("%s = %d, want %d", name, got, want)
			}
		}
		if got := locktest.Count(rm, "sqllock.acquire.duration", strategy, attribute.String("sqllock.outcome", "not_acquired")); got != int64(skips) {
			t.Errorf("acquire.duration{not_acquired} = %d, want %d", got, skips)
		}
	})
}
