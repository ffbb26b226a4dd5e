package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// secondHolder plays the pooler trap: client a takes key through the proxy
// the way its Locker allows (a session lock, or, where that is refused as
// unsupported, a transaction-level lock in DoTx), and while a holds it,
// client b, another client of the same proxy, tries for it the same way.
// bdb is b's *sql.DB. It returns an error when b is granted the key too.
func secondHolder(ctx context.Context, a, b *advisory.Locker, bdb *sql.DB, key string) error {
	lease, err := a.TryAcquire(ctx, key)
	switch {
	case err == nil:
		defer lease.Release(ctx)
		// Each try is a transaction of its own, on whichever server
		// session the proxy has free (other clients may share the pool):
		// a few tries reach the one that holds the lock.
		for range 50 {
			lb, err := b.TryAcquire(ctx, key)
			if err == nil {
				lb.Release(ctx)
				return fmt.Errorf("a second client through the proxy was granted %q while the first held it", key)
			}
			if !errors.Is(err, sqllock.ErrNotAcquired) {
				return err
			}
		}
		return fmt.Errorf("advisory: %w: 50 tries", sqllock.ErrNotAcquired)
	case !errors.Is(err, sqllock.ErrUnsupported):
		return err
	}
	return a.DoTx(ctx, key, func(ctx context.Context, _ *sql.Tx, _ int64) error {
		tx, err := bdb.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := b.TryAcquireTx(ctx, tx, key); err != nil {
			return err
		}
		return fmt.Errorf("a second client through the proxy was granted %q while the first held it", key)
	})
}

// TestPgBouncerTrap: behind PgBouncer in transaction mode, a session
// advisory lock stays on a server session that the proxy hands to the
// next client, and PostgreSQL grants a session's locks to it again: two
// holders. With WithTransactionPooler the session forms refuse and the
// transaction-level ones exclude the second client.
func TestPgBouncerTrap(t *testing.T) {
	ctx := ctxT(t)
	pooledA, pooledB := testdb.PgBouncer(t), testdb.PgBouncer(t)

	t.Run("WithTransactionPooler", func(t *testing.T) {
		a := newLocker(t, pooledA, advisory.WithTransactionPooler())
		b := newLocker(t, pooledB, advisory.WithTransactionPooler())
		key := locktest.Key(t)
		for _, try := range []func(context.Context, string) (sqllock.Lease, error){a.Acquire, a.TryAcquire, a.AcquireShared, a.TryAcquireShared} {
			l, err := try(ctx, key)
			if !errors.Is(err, sqllock.ErrUnsupported) || !strings.Contains(err.Error(), "transaction pooler") || !strings.Contains(err.Error(), key) {
				if l != nil {
					l.Release(ctx)
				}
				t.Fatalf("session lock through the proxy = %v, want ErrUnsupported naming the key and the pooler", err)
			}
		}
		for range 5 {
			err := secondHolder(ctx, a, b, pooledB.DB, key)
			if !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Fatalf("second client = %v, want ErrNotAcquired", err)
			}
		}
	})

	// The trap itself, so that the test above is known to catch it.
	t.Run("WithoutTheMode", func(t *testing.T) {
		a, b := newLocker(t, pooledA), newLocker(t, pooledB)
		t.Cleanup(func() {
			// The stranded lock lives on in the proxy's server session.
			if _, err := pooledA.ExecContext(context.Background(), "SELECT pg_advisory_unlock_all()"); err != nil {
				t.Error(err)
			}
		})
		err := secondHolder(ctx, a, b, pooledB.DB, locktest.Key(t))
		if err == nil || !strings.Contains(err.Error(), "second client") {
			t.Fatalf("session locks through the proxy: %v; want the second client granted (the trap)", err)
		}
		t.Logf("without the mode: %v", err)
	})
}

func TestTransactionPoolerOnMySQL(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	if _, err := advisory.New(db.DB, db.Dialect, advisory.WithTransactionPooler()); !errors.Is(err, sqllock.ErrUnsupported) {
		t.Fatalf("New(MySQL, WithTransactionPooler()) = %v, want ErrUnsupported", err)
	}
}
