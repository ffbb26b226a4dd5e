package tablelock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// auditOf returns the audit records of key.
func auditOf(t testing.TB, db *testdb.DB, key string) []tablelock.AuditEntry {
	t.Helper()
	all, err := tablelock.AuditLog(context.Background(), db.DB)
	if err != nil {
		t.Fatal(err)
	}
	var out []tablelock.AuditEntry
	for _, e := range all {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// TestForceReleaseAudited: a force release records the holder it freed,
// the operator and the reason; one that frees nothing records nothing.
func TestForceReleaseAudited(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		l, op := newLocker(t, db), newLocker(t, db)
		key := locktest.Key(t)
		worker := sqllock.WithOwner(ctx, "worker-1")
		lease, err := l.Acquire(worker, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Acquire(worker, key); err != nil { // two holds
			t.Fatal(err)
		}
		// A stale token: refused, nothing freed, nothing recorded.
		if ok, err := op.ForceRelease(ctx, key, lease.Token()+1000, tablelock.Reason("stale")); ok || !errors.Is(err, sqllock.ErrNotHeld) {
			t.Fatalf("force release under a stale token: %v %v, want ErrNotHeld", ok, err)
		}
		if got := auditOf(t, db, key); len(got) != 0 {
			t.Fatalf("a refused force release was audited: %+v", got)
		}
		before := time.Now()
		ok, err := op.ForceRelease(ctx, key, lease.Token(), tablelock.Reason("INC-7: holder hung"), tablelock.Operator("alice"))
		if !ok || err != nil {
			t.Fatalf("force release: %v %v", ok, err)
		}
		got := auditOf(t, db, key)
		if len(got) != 1 {
			t.Fatalf("%d audit records, want 1: %+v", len(got), got)
		}
		e := got[0]
		want := tablelock.AuditEntry{ID: e.ID, At: e.At, Action: "force-release", Table: tablelock.DefaultTable, Key: key,
			Token: lease.Token(), Owner: "worker-1", Host: identity.Host(), Holds: 2,
			Operator: "alice at " + identity.Host(), Reason: "INC-7: holder hung"}
		if e != want {
			t.Fatalf("audit record\n got %+v\nwant %+v", e, want)
		}
		if d := e.At.Sub(before); d < -time.Minute || d > time.Minute {
			t.Fatalf("audit time %v is %v from the force release", e.At, d)
		}
		// Freed for real: another takes the key, and the holder finds out.
		if b, err := op.TryAcquire(ctx, key); err != nil {
			t.Fatalf("after the force release: %v", err)
		} else {
			defer b.Release(ctx)
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("the freed holder's Release: %v, want ErrLockLost", err)
		}
		// Again: already freed, nothing more recorded.
		if ok, err := op.ForceRelease(ctx, key, lease.Token()); ok || !errors.Is(err, sqllock.ErrNotHeld) {
			t.Fatalf("second force release: %v %v", ok, err)
		}
		if n := len(auditOf(t, db, key)); n != 1 {
			t.Fatalf("%d audit records after a refused second release, want 1", n)
		}
	})
}

// TestForceReleaseAuditRace: operators racing to free one holder free it
// once and leave one record: the record and the release are one
// transaction on the locked row.
func TestForceReleaseAuditRace(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		l := newLocker(t, db)
		key := locktest.Key(t)
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)
		var freed atomic.Int32
		var wg sync.WaitGroup
		for range 6 {
			op := newLocker(t, db)
			wg.Go(func() {
				ok, err := op.ForceRelease(ctx, key, lease.Token(), tablelock.Reason("race"))
				switch {
				case ok:
					freed.Add(1)
				case err != nil && !errors.Is(err, sqllock.ErrNotHeld) && !retryable(err):
					t.Errorf("force release: %v", err)
				}
			})
		}
		wg.Wait()
		if n, recs := freed.Load(), len(auditOf(t, db, key)); n != 1 || recs != 1 {
			t.Fatalf("%d force releases succeeded and %d were audited, want 1 and 1", n, recs)
		}
	})
}

// retryable: SQLite's busy write lock and a deadlock are reported to the
// operator, who tries again; they free and record nothing.
func retryable(err error) bool {
	s := err.Error()
	return strings.Contains(s, "SQLITE_BUSY") || strings.Contains(s, "database is locked") || strings.Contains(s, "Deadlock")
}
