package semaphore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/tablecore"
	"github.com/sqllock/sqllock/internal/telemetry"
	"github.com/sqllock/sqllock/tablelock"
)

// DefaultTable is the permit table migration 00009 creates.
const DefaultTable = "sqllock_semaphores"

// MaxPermits is the largest number of permits a key may have.
const MaxPermits = 1000

var (
	_ sqllock.Extender = (*Permit)(nil)
	_ io.Closer        = (*Semaphore)(nil)
)

// Semaphore hands out up to N permits per key across every process that
// shares its database. It is safe for concurrent use; Close it when done.
type Semaphore struct {
	l       *tablecore.Locker
	db      *sql.DB
	dialect sqllock.Dialect
	// tel records each call once, under sqllock.strategy "semaphore";
	// the permit slots it tries record nothing of their own.
	tel *telemetry.T

	mu       sync.Mutex
	wakes    map[string][]chan struct{} // pollers of a key here, in arrival order
	declared map[string]int             // permit counts written to SizesTable
}

// New returns a Semaphore over db for dialect d. opts are tablelock's: the
// TTL, renewal, safety margin, notify and backoff of the permits, and
// tablelock.WithTable to name another permit table (made with
// tablelock.CreateTable). Its metrics and spans (tablelock.WithMeterProvider,
// WithTracerProvider) carry sqllock.strategy "semaphore", one acquisition
// per call. It does not touch the database; run migrations.Up first. New
// never closes db.
func New(db *sql.DB, d sqllock.Dialect, opts ...tablelock.Option) (*Semaphore, error) {
	l, err := tablecore.New(db, d, append([]tablelock.Option{tablelock.WithTable(DefaultTable)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("semaphore: %w", err)
	}
	tel := telemetry.New("semaphore", d.String(), l.Telemetry())
	return &Semaphore{l: l, db: db, dialect: d, tel: tel, wakes: map[string][]chan struct{}{}, declared: map[string]int{}}, nil
}

// Close ends every permit still held (as lost, like tablelock's Close)
// and refuses later acquisitions with sqllock.ErrClosed. It never closes
// the *sql.DB.
func (s *Semaphore) Close() error { return s.l.Close() }

// Acquire blocks until one of key's first permits permits is free, or ctx
// ends (then the error matches sqllock.ErrNotAcquired and ctx.Err()).
// Every call gets a permit of its own, whatever the owner in ctx: permits
// are not reentrant.
func (s *Semaphore) Acquire(ctx context.Context, key string, permits int) (*Permit, error) {
	return s.acquire(ctx, key, permits, true)
}

// TryAcquire takes one of key's first permits permits if one is free, and
// otherwise returns an error matching sqllock.ErrNotAcquired at once.
func (s *Semaphore) TryAcquire(ctx context.Context, key string, permits int) (*Permit, error) {
	return s.acquire(ctx, key, permits, false)
}

// slotKey is the row of key's permit slot.
func slotKey(key string, slot int) string { return key + "#" + strconv.Itoa(slot) }

func validate(key string, permits int) error {
	if err := sqllock.ValidateKey(key); err != nil {
		return err
	}
	if permits < 1 || permits > MaxPermits {
		return fmt.Errorf("%w: %d permits (want 1 to %d)", sqllock.ErrInvalidOption, permits, MaxPermits)
	}
	if n := len(slotKey(key, permits-1)); n > sqllock.MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes leaves no room for the permit number (at most %d with %d permits)",
			sqllock.ErrInvalidKey, len(key), len(key)-(n-sqllock.MaxKeyLen), permits)
	}
	return nil
}

func (s *Semaphore) acquire(ctx context.Context, key string, permits int, wait bool) (p *Permit, err error) {
	ctx, obs := s.tel.StartAcquire(ctx, key, wait)
	defer func() { lease.EndAcquire(ctx, obs, p, 0, err) }()
	defer func() {
		if err == nil {
			s.declare(ctx, key, permits)
		}
	}()
	if err := validate(key, permits); err != nil {
		return nil, fmt.Errorf("semaphore: acquire %q: %w", key, err)
	}
	// A permit per call: an owner of its own, never a reentrant hold.
	ctx = telemetry.Within(sqllock.WithOwner(ctx, identity.NewOwner()), s.tel, key)
	// A first pass over the slots, from a random one so that callers
	// spread over them instead of all trying slot 0 first.
	first := rand.IntN(permits)
	for i := range permits {
		slot := (first + i) % permits
		lease, err := s.l.TryAcquire(ctx, slotKey(key, slot))
		switch {
		case err == nil:
			return newPermit(s, key, slot, permits, lease), nil
		case !errors.Is(err, sqllock.ErrNotAcquired) || ctxend.Err(ctx) != nil:
			return nil, s.wrap(key, err)
		}
	}
	if !wait {
		return nil, fmt.Errorf("semaphore: acquire %q: %w: all %d permits held", key, sqllock.ErrNotAcquired, permits)
	}
	if s.l.Listener() != nil {
		return s.race(ctx, key, permits)
	}
	return s.poll(ctx, key, permits)
}

// poll waits where the Locker hears no release from elsewhere (MariaDB,
// SQLite, PostgreSQL without NOTIFY or behind a transaction pooler):
// one pass over the slots at a time, between backoff sleeps cut short by a
// release through this Semaphore. One poller per caller, not one per
// slot: SQLite has one write lock for them all.
func (s *Semaphore) poll(ctx context.Context, key string, permits int) (*Permit, error) {
	bo := backoff.Exp{Min: time.Millisecond, Max: 100 * time.Millisecond}
	wake := s.enqueue(key) // before the first pass: a release during it is not missed
	defer s.dequeue(key, wake)
	for {
		first := rand.IntN(permits)
		for i := range permits {
			slot := (first + i) % permits
			lease, err := s.l.TryAcquire(ctx, slotKey(key, slot))
			switch {
			case err == nil:
				return newPermit(s, key, slot, permits, lease), nil
			case ctxend.Err(ctx) != nil:
				return nil, errors.Join(fmt.Errorf("semaphore: acquire %q: %w", key, sqllock.ErrNotAcquired), ctxend.Err(ctx))
			case errors.Is(err, sqllock.ErrNotAcquired), transient(err):
			default:
				return nil, s.wrap(key, err)
			}
		}
		t := time.NewTimer(bo.Next())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(fmt.Errorf("semaphore: acquire %q: %w", key, sqllock.ErrNotAcquired), ctx.Err())
		case <-wake:
			bo.Reset()
		case <-t.C:
		}
		t.Stop()
	}
}

// enqueue adds a poller of key in this process; a release here wakes the
// first one, not all: the others would only crowd the write lock.
func (s *Semaphore) enqueue(key string) chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.wakes[key] = append(s.wakes[key], ch)
	s.mu.Unlock()
	return ch
}

// dequeue removes a poller; a wake-up it had not used goes to the next.
func (s *Semaphore) dequeue(key string, ch chan struct{}) {
	s.mu.Lock()
	q := s.wakes[key]
	for i, c := range q {
		if c == ch {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(s.wakes, key)
	} else {
		s.wakes[key] = q
	}
	s.mu.Unlock()
	select {
	case <-ch:
		s.released(key)
	default:
	}
}

// released wakes the first poller of key in this process, moving it to
// the back of the queue.
func (s *Semaphore) released(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.wakes[key]
	if len(q) == 0 {
		return
	}
	select {
	case q[0] <- struct{}{}:
	default:
	}
	s.wakes[key] = append(q[1:], q[0])
}

// race waits on every slot at once where the Locker hears releases
// (NOTIFY on PostgreSQL) through tablelock's waiting, keeps the
// first slot won and gives back any other won before the rest stopped.
// It returns only when every waiter has.
func (s *Semaphore) race(ctx context.Context, key string, permits int) (*Permit, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		slot  int
		lease sqllock.Lease
		err   error
	}
	results := make(chan result, permits)
	for slot := range permits {
		go func() {
			for {
				lease, err := s.l.Acquire(wctx, slotKey(key, slot))
				if err != nil && wctx.Err() == nil && transient(err) {
					// SQLite's one write lock, crowded by N waiters per
					// caller, can outlast a try's own timeout: try again.
					time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
					continue
				}
				results <- result{slot, lease, err}
				return
			}
		}()
	}
	var won *Permit
	var failed error
	for range permits {
		r := <-results
		switch {
		case r.err == nil && won == nil && failed == nil:
			won = newPermit(s, key, r.slot, permits, r.lease)
			cancel()
		case r.err == nil:
			_ = r.lease.Release(context.WithoutCancel(ctx)) // one permit per call
		case failed == nil && won == nil && wctx.Err() == nil:
			failed = r.err // a database failure, or Close
			cancel()
		}
	}
	switch {
	case won != nil:
		return won, nil
	case failed != nil:
		return nil, s.wrap(key, failed)
	}
	return nil, errors.Join(fmt.Errorf("semaphore: acquire %q: %w", key, sqllock.ErrNotAcquired), ctxend.Err(ctx))
}

// transient reports whether a try failed for a reason that passes: a busy
// or deadlocked database, or a statement cut by its own timeout.
func transient(err error) bool {
	return dberr.IsRetryable(err) || errors.Is(err, context.DeadlineExceeded)
}

func (s *Semaphore) wrap(key string, err error) error {
	return fmt.Errorf("semaphore: acquire %q: %w", key, err)
}

// Permit is one held permit: a lease on one of the key's permit slots.
type Permit struct {
	s       *Semaphore
	key     string
	slot    int
	permits int
	lease   *tablecore.Lease
}

func newPermit(s *Semaphore, key string, slot, permits int, l sqllock.Lease) *Permit {
	return &Permit{s: s, key: key, slot: slot, permits: permits, lease: l.(*tablecore.Lease)}
}

// Key returns the semaphore's key.
func (p *Permit) Key() string { return p.key }

// Slot returns which of the key's permits this is, from 0.
func (p *Permit) Slot() int { return p.slot }

// Token returns the fencing token: strictly larger for each new holder of
// this permit slot, and unique across the database.
func (p *Permit) Token() int64 { return p.lease.Token() }

// Done is closed when the permit is released or lost.
func (p *Permit) Done() <-chan struct{} { return p.lease.Done() }

// Err is nil while the permit is held, matches sqllock.ErrLockLost after a
// loss and sqllock.ErrReleased after Release.
func (p *Permit) Err() error { return p.lease.Err() }

// Release gives the permit back and wakes a waiter. The first call after a
// loss returns the loss, a second call sqllock.ErrReleased.
func (p *Permit) Release(ctx context.Context) error {
	err := p.lease.Release(ctx)
	p.s.released(p.key)
	return err
}

// Extend moves the permit's expiry to at least d from now, as
// tablelock.Lease.Extend.
func (p *Permit) Extend(ctx context.Context, d time.Duration) error { return p.lease.Extend(ctx, d) }
