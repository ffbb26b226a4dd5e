package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/tablelock"
)

// TestForceReleaseFreesTheHolderShown: `locks release KEY --force` frees
// the holder it showed, not whoever holds the key when the release reaches
// the database. Here the key changes hands between the listing and the
// release: the release must say so, fail, and leave the new holder alone.
func TestForceReleaseFreesTheHolderShown(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		src, err := openSource(ctx, db.DB, db.Dialect, tablelock.DefaultTable, false)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		g, err := jobguard.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		e := env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}

		t.Run("lock", func(t *testing.T) {
			l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			key := fmt.Sprintf("orders/%x", rand.Uint64())
			first, err := l.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			shown, err := src.list(ctx, map[string]bool{kindLock: true})
			if err != nil {
				t.Fatal(err)
			}
			// Meanwhile the first holder releases and another takes the key.
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			second, err := l.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			defer second.Release(ctx)

			err = releaseLock(ctx, e, src, shown, releaseSpec{key: key, kind: kindLock, slot: -1, force: true, reason: "test"})
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitFailure || !strings.Contains(ee.msg, "changed hands") {
				t.Errorf("force release of a key that changed hands = %v; want exit %d saying it changed hands", err, exitFailure)
			}
			if err := second.Err(); err != nil {
				t.Fatalf("the new holder's lease: %v", err)
			}
			if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Fatalf("the key is free after a force release aimed at its previous holder: %v", err)
			}
		})

		t.Run("job", func(t *testing.T) {
			job := jobguard.Job{Name: fmt.Sprintf("reports/%x", rand.Uint64()), AtMost: time.Minute}
			first, err := g.TryAcquire(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			shown, err := src.list(ctx, map[string]bool{kindJob: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			second, err := g.TryAcquire(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			defer second.Release(ctx)

			err = releaseLock(ctx, e, src, shown, releaseSpec{key: job.Name, kind: kindJob, slot: -1, force: true, reason: "test"})
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitFailure || !strings.Contains(ee.msg, "changed hands") {
				t.Errorf("force release of a job that changed hands = %v; want exit %d saying it changed hands", err, exitFailure)
			}
			if _, err := g.TryAcquire(ctx, job); !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Fatalf("the job is free after a force release aimed at its previous run: %v", err)
			}
			if err := second.Err(); err != nil {
				t.Fatalf("the new run's lease: %v", err)
			}
		})
	})
}
