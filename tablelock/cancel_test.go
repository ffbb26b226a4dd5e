package tablelock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// An Acquire cancelled while its statement is in flight leaves nothing
// held: a statement that commits after the cancel has its hold given back,
// so the key is free for the next caller, not stuck for a TTL.
func TestCancelledAcquireLeavesNothing(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		key := locktest.Key(t)
		other := newLocker(t, db)
		for i := range 150 {
			l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			// Cancel somewhere inside the round trip.
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(1500))*time.Microsecond)
			lease, err := l.Acquire(ctx, key)
			cancel()
			if err == nil {
				if err := lease.Release(context.Background()); err != nil {
					t.Fatal(err)
				}
			} else if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round %d: cancelled Acquire = %v", i, err)
			}
			l.Close() // waits for the give-back
			free, err := other.TryAcquire(context.Background(), key)
			if err != nil {
				t.Fatalf("round %d: key still held after a cancelled Acquire: %v", i, err)
			}
			if err := free.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestCutOffTryLeavesNothing: a try whose statement is cut off by its own
// timeout while the caller still waits (MariaDB: the statement queues
// behind a row lock past the timeout, and the server commits it once the
// lock frees) does not leave the key taken for a TTL by an owner nobody
// knows: a fresh owner's take is given back, after it, before the caller
// hears of it. The table holds many expired rows besides, as a long-used
// one does, so that MariaDB would rather find live rows through the
// expires_at index, where the give-back would not wait for the take.
func TestCutOffTryLeavesNothing(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	ctx := context.Background()
	table := fmt.Sprintf("tl_cutoff_%x", rand.Uint64())
	if err := tablelock.CreateTable(ctx, db.DB, db.Dialect, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	dead := "INSERT INTO " + table + " VALUES " + strings.Repeat("(UUID(), '', 'h', 0, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)),", 299) +
		"(UUID(), '', 'h', 0, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))"
	if _, err := db.ExecContext(ctx, dead); err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(time.Minute))
	key := locktest.Key(t)
	lease, err := l.Acquire(ctx, key) // the row exists, free, after this
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var k []byte
	if err := tx.QueryRow("SELECT lock_key FROM "+table+" WHERE lock_key = ? FOR UPDATE", key).Scan(&k); err != nil {
		t.Fatal(err)
	}
	// Past the try's own 5s, then the lock frees and the take commits.
	rolledBack := make(chan error, 1)
	go func() {
		time.Sleep(6 * time.Second)
		rolledBack <- tx.Rollback()
	}()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if s, err := l.TryAcquire(tctx, key); err == nil {
		s.Release(ctx)
		t.Fatal("TryAcquire won although its statement waited past its timeout")
	}
	if err := <-rolledBack; err != nil {
		t.Fatal(err)
	}
	l.Close() // waits for any give-back still under way
	free, err := newLocker(t, db, tablelock.WithTable(table)).TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("key still taken after a try cut off by its timeout: %v", err)
	}
	if err := free.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
