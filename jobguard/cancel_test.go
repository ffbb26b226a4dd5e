package jobguard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
)

// TestCancelledTryLeavesJobFree: a TryAcquire whose context ends while its
// statement is in flight is told "not acquired" at once, and the job is not
// left taken for AtMost by a run that never executes, although the server
// commits the statement after the caller gave up:
//
//   - MariaDB: the statement waits on a row lock held by another
//     transaction. The driver gives up by closing its socket, which a
//     session waiting on a lock does not notice: once the lock frees, the
//     server runs the upsert and commits it.
//   - PostgreSQL: the server answers at once but the answer reaches the
//     client late (a proxy holds back what the server sends), so the
//     commit is done when the caller gives up.
func TestCancelledTryLeavesJobFree(t *testing.T) {
	t.Run("mariadb", func(t *testing.T) {
		db := testdb.Open(t, sqllock.MariaDB)
		table := jobTable(t, db)
		job := jobguard.Job{Name: locktest.Key(t), AtMost: time.Minute}
		g := newGuard(t, db, table)
		freeJobRow(t, g, job)

		// Another transaction holds the job's row lock for a while.
		tx, err := db.BeginTx(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		var name []byte
		if err := tx.QueryRow("SELECT lock_key FROM "+table+" WHERE lock_key = ? FOR UPDATE", job.Name).Scan(&name); err != nil {
			t.Fatal(err)
		}
		cancelledTry(t, g, job)
		// The try's statement is still queued for the row lock on the
		// server: it gets the row as soon as the lock frees.
		time.Sleep(300 * time.Millisecond)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		g.Close() // waits for the give-back
		jobFree(t, newGuard(t, db, table), job)
	})
	t.Run("mysql, lock held past the try's own timeout", func(t *testing.T) {
		// The try's statement is cut off by its own timeout too, and still
		// runs once the lock frees: its give-back, queued behind it for the
		// row lock, frees the job after it.
		db := testdb.Open(t, sqllock.MariaDB)
		table := jobTable(t, db)
		job := jobguard.Job{Name: locktest.Key(t), AtMost: time.Minute}
		g := newGuard(t, db, table)
		freeJobRow(t, g, job)
		tx, err := db.BeginTx(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		var name []byte
		if err := tx.QueryRow("SELECT lock_key FROM "+table+" WHERE lock_key = ? FOR UPDATE", job.Name).Scan(&name); err != nil {
			t.Fatal(err)
		}
		cancelledTry(t, g, job)
		time.Sleep(6 * time.Second) // past the try's 5s
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		g.Close()
		jobFree(t, newGuard(t, db, table), job)
	})
	t.Run("postgres", func(t *testing.T) {
		p := testdb.NewProxy(t, sqllock.Postgres)
		table := jobTable(t, p.DB)
		job := jobguard.Job{Name: locktest.Key(t), AtMost: time.Minute}
		g := newGuard(t, p.DB, table)
		freeJobRow(t, g, job)

		p.Delay(500 * time.Millisecond)
		cancelledTry(t, g, job)
		g.Close() // waits for the give-back
		jobFree(t, newGuard(t, testdb.Open(t, sqllock.Postgres), table), job)
	})
}

// freeJobRow runs job once, so that its row exists and is free.
func freeJobRow(t *testing.T, g *jobguard.Guard, job jobguard.Job) {
	t.Helper()
	if ran, err := g.Run(ctxT(t), job, func(context.Context) error { return nil }); !ran || err != nil {
		t.Fatalf("first Run = %v, %v", ran, err)
	}
}

// cancelledTry runs a TryAcquire whose deadline passes while its statement
// is in flight, and checks it reports the deadline at once.
func cancelledTry(t *testing.T, g *jobguard.Guard, job jobguard.Job) {
	t.Helper()
	const deadline = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	lease, err := g.TryAcquire(ctx, job)
	if err == nil {
		t.Fatalf("TryAcquire won (token %d) although its deadline passed while the job's row was locked or its answer delayed", lease.Token())
	}
	if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled TryAcquire = %v; want ErrNotAcquired and DeadlineExceeded", err)
	}
	if took := time.Since(start); took > deadline+time.Second {
		t.Errorf("cancelled TryAcquire returned after %v, not at its deadline %v", took, deadline)
	}
}

// jobFree checks that another replica can run job now: the cancelled try
// did not leave it taken for AtMost.
func jobFree(t *testing.T, other *jobguard.Guard, job jobguard.Job) {
	t.Helper()
	lease, err := other.TryAcquire(ctxT(t), job)
	if err != nil {
		t.Fatalf("job still taken after a cancelled TryAcquire (AtMost %v): %v", job.AtMost, err)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
