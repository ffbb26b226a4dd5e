package jobguard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/tablelock"
)

// TestExtend: a run extended past its AtMost keeps the job (no other
// replica takes it, its lease is not lost); once the extension has run
// out, the job frees itself; an extension of a run whose row is gone is
// refused as lost. The force release that frees it is audited.
func TestExtend(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := jobTable(t, db)
		a, b := newGuard(t, db, table), newGuard(t, db, table)
		const atMost, ext = 500 * time.Millisecond, 2 * time.Second
		job := jobguard.Job{Name: locktest.Key(t), AtMost: atMost}

		run, err := a.TryAcquire(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Extend(ctx, ext); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * atMost) // past AtMost, well inside the extension
		if err := run.Err(); err != nil {
			t.Fatalf("extended run lost past its AtMost: %v", err)
		}
		if _, err := b.TryAcquire(ctx, job); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("another replica's try past AtMost: %v, want ErrNotAcquired", err)
		}
		// Without keep-alive, the run ends at its extended expiry.
		select {
		case <-run.Done():
		case <-time.After(2 * ext):
			t.Fatal("the extended run did not end at its extension's end")
		}
		if !errors.Is(run.Err(), sqllock.ErrLockLost) {
			t.Fatalf("after the extension: %v, want ErrLockLost", run.Err())
		}
		if err := run.Extend(ctx, ext); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Extend of a run past its extension: %v, want ErrLockLost", err)
		}

		next := waitTake(t, b, job)
		if next.Token() <= run.Token() {
			t.Fatalf("next run's token %d not above %d", next.Token(), run.Token())
		}
		if ok, err := b.ForceRelease(ctx, job.Name, next.Token(), tablelock.Reason("stuck run")); !ok || err != nil {
			t.Fatalf("force release: %v %v", ok, err)
		}
		trail, err := tablelock.AuditLog(ctx, db.DB)
		if err != nil {
			t.Fatal(err)
		}
		var rec []tablelock.AuditEntry
		for _, e := range trail {
			if e.Key == job.Name {
				rec = append(rec, e)
			}
		}
		if len(rec) != 1 || rec[0].Table != table || rec[0].Token != next.Token() || rec[0].Reason != "stuck run" || rec[0].Holds != 1 {
			t.Fatalf("audit trail of the job: %+v; want one record of table %s, token %d, reason \"stuck run\"", rec, table, next.Token())
		}
		if err := next.Extend(ctx, ext); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Extend of a force-released run: %v, want ErrLockLost", err)
		}
		_ = run.Release(ctx)
		if err := run.Extend(ctx, ext); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Extend after Release of a lost run: %v, want its loss", err)
		}
	})
}

// waitTake takes job through g, retrying while the database has not yet
// passed the previous run's expiry.
func waitTake(t *testing.T, g *jobguard.Guard, job jobguard.Job) *jobguard.Lease {
	t.Helper()
	ctx := ctxT(t)
	var got *jobguard.Lease
	eventually(t, "the job to free itself", func() bool {
		s, err := g.TryAcquire(ctx, job)
		if err != nil && !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatal(err)
		}
		got = s
		return err == nil
	})
	return got
}
