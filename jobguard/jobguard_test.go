package jobguard_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
)

// jobTable creates a job table unique to the test, dropped when it ends:
// the shared test database is used by other packages at the same time.
func jobTable(t testing.TB, db *testdb.DB) string {
	t.Helper()
	table := fmt.Sprintf("jobs_test_%x", rand.Uint64())
	if err := jobguard.CreateTable(context.Background(), db.DB, db.Dialect, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
	return table
}

// newGuard returns a Guard closed when the test ends.
func newGuard(t testing.TB, db *testdb.DB, table string) *jobguard.Guard {
	t.Helper()
	g, err := jobguard.New(db.DB, db.Dialect, jobguard.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or a generous timeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOneRunnerOfN(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, table := ctxT(t), jobTable(t, db)
		job := jobguard.Job{Name: locktest.Key(t), AtMost: time.Minute, AtLeast: 30 * time.Second}
		const n = 8
		var ran atomic.Int32
		var inside atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, n)
		start := make(chan struct{})
		guards := make([]*jobguard.Guard, n)
		for i := range n {
			g := newGuard(t, db, table)
			guards[i] = g
			wg.Go(func() {
				<-start
				ok, err := g.Run(ctx, job, func(ctx context.Context) error {
					if inside.Add(1) != 1 {
						return errors.New("two runners inside the job")
					}
					time.Sleep(20 * time.Millisecond)
					inside.Add(-1)
					ran.Add(1)
					return nil
				})
				if err != nil {
					errs <- fmt.Errorf("Run: ran=%v, %w", ok, err)
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := ran.Load(); got != 1 {
			t.Fatalf("%d of %d replicas ran the job, want exactly 1", got, n)
		}
		// On SQLite a Guard keeps a connection of its own until Close.
		for _, g := range guards {
			g.Close()
		}
		if inUse := db.Stats().InUse; inUse != 0 {
			t.Errorf("%d connections still in use after the runs and Close", inUse)
		}
	})
}

func TestHoldAtLeast(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, table := ctxT(t), jobTable(t, db)
		a, b := newGuard(t, db, table), newGuard(t, db, table)
		noop := func(context.Context) error { return nil }

		// A fast run keeps the job for AtLeast: a replica firing late for
		// the same period skips.
		long := jobguard.Job{Name: locktest.Key(t) + "/long", AtMost: time.Minute, AtLeast: 30 * time.Second}
		if ran, err := a.Run(ctx, long, noop); !ran || err != nil {
			t.Fatalf("first Run = %v, %v; want ran", ran, err)
		}
		if ran, err := b.Run(ctx, long, noop); ran || err != nil {
			t.Fatalf("Run inside hold-at-least = %v, %v; want skipped with no error", ran, err)
		}
		_, err := b.TryAcquire(ctx, long)
		if !errors.Is(err, sqllock.ErrNotAcquired) || !strings.Contains(err.Error(), identity.Host()) {
			t.Fatalf("TryAcquire inside hold-at-least = %v; want ErrNotAcquired naming the holder %s", err, identity.Host())
		}
		infos, err := a.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 1 || infos[0].Key != long.Name || infos[0].Holds != 0 || infos[0].Token <= 0 {
			t.Fatalf("List = %+v; want %q, released, with a token", infos, long.Name)
		}
		if d := infos[0].ExpiresAt.Sub(infos[0].AcquiredAt); d < 29*time.Second || d > 31*time.Second {
			t.Errorf("released row kept for %v after its start, want AtLeast = 30s", d)
		}

		// Once AtLeast has passed, the next firing runs it again, with a
		// larger token.
		short := jobguard.Job{Name: locktest.Key(t) + "/short", AtMost: time.Minute, AtLeast: 200 * time.Millisecond}
		var first, second int64
		if ran, err := a.Run(ctx, short, func(ctx context.Context) error {
			first, _ = sqllock.TokenFrom(ctx)
			return nil
		}); !ran || err != nil {
			t.Fatalf("Run = %v, %v", ran, err)
		}
		eventually(t, "the job to run again after AtLeast", func() bool {
			ran, err := b.Run(ctx, short, func(ctx context.Context) error {
				second, _ = sqllock.TokenFrom(ctx)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return ran
		})
		if first <= 0 || second <= first {
			t.Fatalf("tokens %d then %d; want increasing", first, second)
		}
	})
}

func TestHoldAtMost(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, table := ctxT(t), jobTable(t, db)
		a, b := newGuard(t, db, table), newGuard(t, db, table)
		job := jobguard.Job{Name: locktest.Key(t), AtMost: 500 * time.Millisecond}

		// A runner that never releases (crashed) frees the job at AtMost.
		crashed, err := a.TryAcquire(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryAcquire(ctx, job); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryAcquire while held = %v, want ErrNotAcquired", err)
		}
		select {
		case <-crashed.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done() not closed after AtMost")
		}
		if !errors.Is(crashed.Err(), sqllock.ErrLockLost) {
			t.Fatalf("Err() after AtMost = %v, want ErrLockLost", crashed.Err())
		}
		var next *jobguard.Lease
		eventually(t, "another replica to take the job after AtMost", func() bool {
			next, err = b.TryAcquire(ctx, job)
			if err != nil && !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Fatal(err)
			}
			return err == nil
		})
		if next.Token() <= crashed.Token() {
			t.Errorf("token %d after a crashed run's %d; want larger", next.Token(), crashed.Token())
		}
		// The stale runner's release must not free its successor's job.
		if err := crashed.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("stale Release = %v, want ErrLockLost", err)
		}
		if _, err := a.TryAcquire(ctx, job); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("after a stale Release the job is free again (%v); it must stay with its new runner", err)
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := next.Release(ctx); !errors.Is(err, sqllock.ErrReleased) {
			t.Errorf("second Release = %v, want ErrReleased", err)
		}
	})
}

func TestRunCancelledBeforeAtMost(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, table := ctxT(t), jobTable(t, db)
		g := newGuard(t, db, table)
		job := jobguard.Job{Name: locktest.Key(t), AtMost: 300 * time.Millisecond}
		var cause error
		ran, err := g.Run(ctx, job, func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return ctx.Err()
			case <-time.After(20 * time.Second):
				return errors.New("the job's context outlived its hold-at-most")
			}
		})
		if !ran {
			t.Fatal("the job did not run")
		}
		if !errors.Is(cause, sqllock.ErrLockLost) || !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("cause %v, Run error %v; want both to match ErrLockLost", cause, err)
		}
	})
}

// TestForceRelease: an operator frees the run it names by token; a token
// that no longer holds the job frees nothing and says who holds it.
func TestForceRelease(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, table := ctxT(t), jobTable(t, db)
		a, op := newGuard(t, db, table), newGuard(t, db, table)
		job := jobguard.Job{Name: locktest.Key(t), AtMost: time.Minute}
		held, err := a.TryAcquire(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []int64{0, -1} {
			if ok, err := op.ForceRelease(ctx, job.Name, bad); ok || !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Fatalf("ForceRelease with token %d = %v, %v; want ErrInvalidOption", bad, ok, err)
			}
		}
		if ok, err := op.ForceRelease(ctx, job.Name, held.Token()+1000); ok || !errors.Is(err, sqllock.ErrNotHeld) || !strings.Contains(err.Error(), fmt.Sprintf("token %d now", held.Token())) {
			t.Fatalf("ForceRelease naming another run = %v, %v; want ErrNotHeld naming token %d", ok, err, held.Token())
		}
		if err := held.Err(); err != nil {
			t.Fatalf("a ForceRelease naming another run hurt the holder: %v", err)
		}
		if ok, err := op.ForceRelease(ctx, job.Name, held.Token()); !ok || err != nil {
			t.Fatalf("ForceRelease = %v, %v; want true", ok, err)
		}
		if ok, err := op.ForceRelease(ctx, job.Name, held.Token()); ok || err != nil {
			t.Fatalf("second ForceRelease = %v, %v; want false", ok, err)
		}
		again, err := op.TryAcquire(ctx, job)
		if err != nil {
			t.Fatalf("TryAcquire after ForceRelease: %v", err)
		}
		if err := held.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("Release after ForceRelease = %v, want ErrLockLost", err)
		}
		// The first run's token no longer frees the job: another run has it.
		if ok, err := op.ForceRelease(ctx, job.Name, held.Token()); ok || !errors.Is(err, sqllock.ErrNotHeld) {
			t.Fatalf("ForceRelease of the first run after the job changed hands = %v, %v; want ErrNotHeld", ok, err)
		}
		if err := again.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestInvalidJob(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	ctx, table := ctxT(t), jobTable(t, db)
	g := newGuard(t, db, table)
	noop := func(context.Context) error { return nil }
	for _, tc := range []struct {
		name string
		job  jobguard.Job
		want error
	}{
		{"empty name", jobguard.Job{AtMost: time.Minute}, sqllock.ErrInvalidKey},
		{"long name", jobguard.Job{Name: strings.Repeat("j", sqllock.MaxKeyLen+1), AtMost: time.Minute}, sqllock.ErrInvalidKey},
		{"no AtMost", jobguard.Job{Name: "j"}, sqllock.ErrInvalidOption},
		{"tiny AtMost", jobguard.Job{Name: "j", AtMost: time.Millisecond}, sqllock.ErrInvalidOption},
		{"negative AtLeast", jobguard.Job{Name: "j", AtMost: time.Minute, AtLeast: -time.Second}, sqllock.ErrInvalidOption},
		{"AtLeast above AtMost", jobguard.Job{Name: "j", AtMost: time.Second, AtLeast: time.Minute}, sqllock.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran, err := g.Run(ctx, tc.job, noop)
			if ran || !errors.Is(err, tc.want) {
				t.Fatalf("Run = %v, %v; want an error matching %v", ran, err, tc.want)
			}
		})
	}
	if infos, err := g.List(ctx); err != nil || len(infos) != 0 {
		t.Fatalf("List after invalid jobs = %v, %v; want nothing written", infos, err)
	}
	if _, err := jobguard.New(db.DB, db.Dialect, jobguard.WithTable("jobs; DROP TABLE x")); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Fatalf("New with a bad table name = %v, want ErrInvalidOption", err)
	}
	if _, err := g.Run(ctx, jobguard.Job{Name: "j", AtMost: time.Minute}, nil); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Fatalf("Run with a nil function = %v, want ErrInvalidOption", err)
	}
}

func TestCancelledContext(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	g := newGuard(t, db, jobTable(t, db))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran, err := g.Run(ctx, jobguard.Job{Name: "j", AtMost: time.Minute}, func(context.Context) error { return nil })
	if ran || !errors.Is(err, context.Canceled) || !errors.Is(err, sqllock.ErrNotAcquired) {
		t.Fatalf("Run with a cancelled context = %v, %v; want an error matching context.Canceled and ErrNotAcquired", ran, err)
	}
}

// TestSchemaMatchesMigration keeps Schema and the shipped migrations in
// step: a table made from Schema has the columns, types, collations and
// indexes of the one migrations 00004, 00006 and 00007 leave behind.
func TestSchemaMatchesMigration(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		if got, want := testdb.Shape(t, db, jobTable(t, db)), testdb.Shape(t, db, jobguard.DefaultTable); got != want {
			t.Errorf("a table made by Schema differs from the migrated one:\n got\n%s\n want\n%s", got, want)
		}
	})
}

// TestNamesCompareBytes: jobs whose names differ only in case or trailing
// space are different jobs, each run by its own replica, in the shipped
// table and in one made by CreateTable.
func TestNamesCompareBytes(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		for _, table := range []string{jobguard.DefaultTable, jobTable(t, db)} {
			a, b := newGuard(t, db, table), newGuard(t, db, table)
			base := locktest.Key(t)
			for _, pair := range [][2]string{{"Report", "report"}, {"report", "report "}} {
				ja := jobguard.Job{Name: base + "/" + pair[0], AtMost: time.Minute}
				jb := jobguard.Job{Name: base + "/" + pair[1], AtMost: time.Minute}
				la, err := a.TryAcquire(ctx, ja)
				if err != nil {
					t.Fatal(err)
				}
				lb, err := b.TryAcquire(ctx, jb)
				if err != nil {
					t.Errorf("%s: job %q skipped while only %q runs: %v", table, jb.Name, ja.Name, err)
				} else if err := lb.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if err := la.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
