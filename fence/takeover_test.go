package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// chunkTable creates the progress of a chunked task: one row per chunk
// done, unique per (task, chunk), as the trial's import job kept it.
func chunkTable(t *testing.T, db *testdb.DB) string {
	t.Helper()
	name := fmt.Sprintf("fence_chunks_%d", rand.Uint32())
	if _, err := db.Exec("CREATE TABLE " + name + " (task VARCHAR(255) NOT NULL, chunk INTEGER NOT NULL, writer VARCHAR(8) NOT NULL, PRIMARY KEY (task, chunk))"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + name) })
	return name
}

// writeChunk records chunk of task as done by writer, through the fence
// (the lease in ctx).
func writeChunk(ctx context.Context, db *testdb.DB, f *fence.Fence, table, task string, chunk int, writer string) error {
	return f.Write(ctx, db.DB, task, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (task, chunk, writer) VALUES ("+ph(db.Dialect, 1)+", "+ph(db.Dialect, 2)+", "+ph(db.Dialect, 3)+")", task, chunk, writer)
		return err
	})
}

// progress reads how many chunks of task are done, outside any fence.
func progress(ctx context.Context, db *testdb.DB, table, task string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(chunk), 0) FROM "+table+" WHERE task = "+ph(db.Dialect, 1), task).Scan(&n)
	return n, err
}

// The trial's takeover, step by step. Holder A writes the chunks of a task
// through the fence; an operator force-releases A's key and B takes it.
// B reads the progress and carries on from there. A has not been told yet
// (its next renewal is seconds away) and writes one more chunk through
// the fence, between B's read and B's first write.
//
// Without a claim the fence still holds A's token (B has written nothing
// yet), so A's chunk is accepted, and B, acting on the progress it read,
// writes the same chunk again: it fails on the unique key, the work the
// trial lost. With Claim before the read, B's token is recorded first: A's
// late write is refused with ErrStaleToken, and B's read and writes see
// every chunk that was accepted.
func TestClaimOnTakeover(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		for _, claim := range []bool{false, true} {
			name := "without claim"
			if claim {
				name = "with claim"
			}
			t.Run(name, func(t *testing.T) {
				ctx := ctxT(t)
				table := chunkTable(t, db)
				key := locktest.Key(t)
				f := newFence(t, db.Dialect)
				// A long TTL: A's renewal (every TTL/3) does not come during
				// the test, as in the trial, where it was ~0.9s away.
				locker, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(30*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				defer locker.Close()

				// A: a worker that writes the chunks it is told to, under its
				// lease.
				a, err := locker.Acquire(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				chunks, results := make(chan int), make(chan error)
				aDone := make(chan error, 1)
				go func() {
					aDone <- sqllock.DoLease(ctx, a, func(ctx context.Context) error {
						for c := range chunks {
							results <- writeChunk(ctx, db, f, table, key, c, "A")
						}
						return nil
					})
				}()
				writeA := func(c int) error { chunks <- c; return <-results }
				for c := 1; c <= 2; c++ {
					if err := writeA(c); err != nil {
						t.Fatalf("A writes chunk %d: %v", c, err)
					}
				}

				// The operator frees A's key; B takes it.
				if freed, err := locker.ForceRelease(ctx, key, a.Token()); err != nil || !freed {
					t.Fatalf("force release: %v, %v", freed, err)
				}
				var lateA, bErr error
				var read int
				err = sqllock.Do(ctx, locker, key, func(ctx context.Context) error {
					if claim {
						if err := f.Claim(ctx, db.DB, key); err != nil {
							return fmt.Errorf("claim: %w", err)
						}
					}
					var err error
					if read, err = progress(ctx, db, table, key); err != nil {
						return err
					}
					lateA = writeA(read + 1) // A, not told yet, writes on
					for c := read + 1; c <= 4; c++ {
						if err := writeChunk(ctx, db, f, table, key, c, "B"); err != nil {
							bErr = fmt.Errorf("B writes chunk %d: %w", c, err)
							return nil
						}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("B: %v", err)
				}
				close(chunks)
				if err := <-aDone; !errors.Is(err, sqllock.ErrLockLost) {
					t.Errorf("A's DoLease: %v, want ErrLockLost", err)
				}
				t.Logf("B read %d chunks done; A's late write: %v; B: %v", read, lateA, bErr)

				if !claim {
					// The gap the claim closes: A's late chunk was accepted
					// and B's copy of it failed.
					if lateA != nil || bErr == nil {
						t.Fatalf("without a claim: A's late write %v, B %v; want A accepted and B failing on the chunk A wrote", lateA, bErr)
					}
					return
				}
				if !errors.Is(lateA, sqllock.ErrStaleToken) {
					t.Errorf("A's late write after B's claim: %v, want ErrStaleToken", lateA)
				}
				if bErr != nil {
					t.Errorf("B lost work after its claim: %v", bErr)
				}
				rows, err := db.QueryContext(ctx, "SELECT chunk, writer FROM "+table+" WHERE task = "+ph(db.Dialect, 1)+" ORDER BY chunk", key)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var got string
				for rows.Next() {
					var c int
					var w string
					if err := rows.Scan(&c, &w); err != nil {
						t.Fatal(err)
					}
					got += fmt.Sprintf("%d%s ", c, w)
				}
				if want := "1A 2A 3B 4B "; got != want {
					t.Errorf("chunks %q, want %q", got, want)
				}
			})
		}
	})
}

// A lease lost while its holder works: sqllock.Do cancels the holder's
// context, and the holder's next fenced write must say that the lease was
// lost (ErrLockLost, with the strategy's cause), not only "context
// canceled", which reads like a shutdown.
func TestWriteReportsTheLoss(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		key := locktest.Key(t)
		f := newFence(t, db.Dialect)
		locker, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer locker.Close()
		var writeErr error
		doErr := sqllock.Do(ctx, locker, key, func(ctx context.Context) error {
			token, _ := sqllock.TokenFrom(ctx)
			if _, err := locker.ForceRelease(ctx, key, token); err != nil {
				return err
			}
			<-ctx.Done() // the next renewal finds the row gone
			writeErr = f.Write(ctx, db.DB, key, func(*sql.Tx) error { return nil })
			return writeErr
		})
		t.Logf("Write: %v", writeErr)
		if !errors.Is(writeErr, sqllock.ErrLockLost) {
			t.Errorf("Write after the loss: %v, want an error matching ErrLockLost", writeErr)
		}
		if !errors.Is(doErr, sqllock.ErrLockLost) {
			t.Errorf("Do: %v, want an error matching ErrLockLost", doErr)
		}
	})
}
