package e2e_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// primitives are the grants of the primitives built on the lock table,
// taken before a database restart (see TestDatabaseRestart). Their rows
// are committed, so with a TTL longer than the outage each grant outlives
// the restart: still held, refused to anyone else, and the grant after its
// release carries a larger token.
type primitives struct {
	sem    *semaphore.Semaphore
	rw     *rwlock.RWLock
	el     *election.Election
	permit *semaphore.Permit
	read   *rwlock.Lease
	write  *rwlock.Lease
	lead   *election.Leadership
}

func holdPrimitives(t *testing.T, db *testdb.DB) *primitives {
	t.Helper()
	ctx := context.Background()
	ttl := tablelock.WithTTL(20 * time.Second)
	p := &primitives{}
	var err error
	if p.sem, err = semaphore.New(db.DB, db.Dialect, ttl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.sem.Close() })
	if p.rw, err = rwlock.New(db.DB, db.Dialect, 4, ttl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.rw.Close() })
	if p.el, err = election.New(db.DB, db.Dialect, ttl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.el.Close() })
	key := locktest.Key(t)
	if p.permit, err = p.sem.Acquire(ctx, key+"-sem", 1); err != nil {
		t.Fatal(err)
	}
	if p.read, err = p.rw.RLock(ctx, key+"-read"); err != nil {
		t.Fatal(err)
	}
	if p.write, err = p.rw.Lock(ctx, key+"-write"); err != nil {
		t.Fatal(err)
	}
	if p.lead, err = p.el.Campaign(ctx, key+"-lead", "before"); err != nil {
		t.Fatal(err)
	}
	return p
}

// check runs after the restart, on fresh instances for the other side.
func (p *primitives) check(t *testing.T, db *testdb.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, err := range map[string]error{"permit": p.permit.Err(), "read": p.read.Err(), "write": p.write.Err(), "leadership": p.lead.Err()} {
		if err != nil {
			t.Errorf("%s lost to a restart shorter than its TTL: %v", name, err)
		}
	}
	sem, err := semaphore.New(db.DB, db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	defer sem.Close()
	rw, err := rwlock.New(db.DB, db.Dialect, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	el, err := election.New(db.DB, db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	defer el.Close()

	// Refused to others: a server still settling may answer with an
	// error other than the refusal, so retry those within the deadline.
	refused := func(what string, try func() error) {
		t.Helper()
		for {
			err := try()
			if errors.Is(err, sqllock.ErrNotAcquired) {
				return
			}
			if err == nil || ctx.Err() != nil {
				t.Fatalf("%s after the restart = %v, want ErrNotAcquired", what, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	refused("another permit of a 1-permit semaphore", func() error {
		got, err := sem.TryAcquire(ctx, p.permit.Key(), 1)
		if err == nil {
			got.Release(ctx)
		}
		return err
	})
	refused("a writer beside the reader", func() error {
		got, err := rw.TryLock(ctx, p.read.Key())
		if err == nil {
			got.Release(ctx)
		}
		return err
	})
	refused("a reader beside the writer", func() error {
		got, err := rw.TryRLock(ctx, p.write.Key())
		if err == nil {
			got.Release(ctx)
		}
		return err
	})
	if ld, err := el.Leader(ctx, p.lead.Name()); err != nil || ld.Term != p.lead.Term() || ld.Value != "before" {
		t.Errorf("Leader after the restart = %+v, %v; want term %d, value %q", ld, err, p.lead.Term(), "before")
	}

	// Released, each comes back to another holder with a larger token.
	// Each step is retried while the pools still hand out connections that
	// died with the server.
	within := func(what string, f func() error) {
		t.Helper()
		for {
			err := f()
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s after the restart: %v", what, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	within("release the permit", func() error { return p.permit.Release(ctx) })
	within("take the permit", func() error {
		permit, err := sem.Acquire(ctx, p.permit.Key(), 1)
		if err == nil {
			larger(t, "semaphore", p.permit.Token(), permit.Token())
			permit.Release(ctx)
		}
		return err
	})
	for _, held := range []*rwlock.Lease{p.read, p.write} {
		within("release "+held.Key(), func() error { return held.Release(ctx) })
		within("write-lock "+held.Key(), func() error {
			next, err := rw.Lock(ctx, held.Key())
			if err == nil {
				larger(t, "rwlock "+held.Key(), held.Token(), next.Token())
				next.Release(ctx)
			}
			return err
		})
	}
	within("resign", func() error { return p.lead.Resign(ctx) })
	within("campaign", func() error {
		lead, err := el.Campaign(ctx, p.lead.Name(), "after")
		if err == nil {
			larger(t, "election term", p.lead.Term(), lead.Term())
			lead.Resign(ctx)
		}
		return err
	})
}

func larger(t *testing.T, what string, before, after int64) {
	t.Helper()
	if after <= before {
		t.Errorf("%s: token after the restart %d not above %d", what, after, before)
	}
}
