package rwlock

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/tablecore"
	"github.com/sqllock/sqllock/internal/telemetry"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// DefaultTable is the table the lock rows live in: the permit table of
// package semaphore (migration 00009), under keys no semaphore makes
// unless its key holds the unit separator (0x1F).
const DefaultTable = semaphore.DefaultTable

// MaxReaders is the largest number of readers a key may admit at once.
const MaxReaders = 256

// sep starts the suffix of a lock row's key.
const sep = "\x1frw:"

var (
	_ io.Closer        = (*RWLock)(nil)
	_ sqllock.Extender = (*Lease)(nil)
)

// RWLock hands out read and write holds of keys across processes. It is
// safe for concurrent use; Close it when done.
type RWLock struct {
	l       *tablecore.Locker
	tbl     *locktable.Table // l's: a writer asks it which reader rows are held
	readers int
	// tel records each call once, and a hold as one lease, under
	// sqllock.strategy "rwlock"; the rows taken on the way record nothing.
	tel *telemetry.T

	mu    sync.Mutex
	holds map[holdKey]*hold  // reentrant holds, by key and owner
	mine  map[string][]*hold // holds taken without an owner, by key
}

type holdKey struct{ key, owner string }

// hold is one owner's grant of a key, shared by its reentrant leases.
type hold struct {
	write bool
	n     int // leases not yet released
	token int64
	lease *tablecore.Lease // the gate (writer) or the reader slot
	gid   uint64           // the goroutine that took it without an owner; 0 with one
}

// New returns an RWLock over db for dialect d that admits up to readers
// readers of a key at once (more wait; a writer asks about that many rows
// in one statement).
// opts are tablelock's: TTL, renewal, backoff, and tablelock.WithTable for
// another table made with tablelock.CreateTable. Its metrics and spans
// carry sqllock.strategy "rwlock", one acquisition per call. It does not
// touch the database; run migrations.Up first. New never closes db.
func New(db *sql.DB, d sqllock.Dialect, readers int, opts ...tablelock.Option) (*RWLock, error) {
	if readers < 1 || readers > MaxReaders {
		return nil, fmt.Errorf("rwlock: %w: %d readers (want 1 to %d)", sqllock.ErrInvalidOption, readers, MaxReaders)
	}
	l, err := tablecore.New(db, d, append([]tablelock.Option{tablelock.WithTable(DefaultTable)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("rwlock: %w", err)
	}
	tel := telemetry.New("rwlock", d.String(), l.Telemetry())
	return &RWLock{l: l, tbl: l.Table(), readers: readers, tel: tel, holds: map[holdKey]*hold{}, mine: map[string][]*hold{}}, nil
}

// Close ends every hold still held (as lost, like tablelock's Close) and
// refuses later calls with sqllock.ErrClosed. It never closes the *sql.DB.
func (rw *RWLock) Close() error { return rw.l.Close() }

func gateKey(key string) string           { return key + sep + "w" }
func slotKey(key string, slot int) string { return key + sep + "r" + strconv.Itoa(slot) }

// slotKeys are the keys of key's reader rows.
func (rw *RWLock) slotKeys(key string) []string {
	out := make([]string, rw.readers)
	for i := range out {
		out[i] = slotKey(key, i)
	}
	return out
}

func (rw *RWLock) validate(key string) error {
	if err := sqllock.ValidateKey(key); err != nil {
		return err
	}
	if n := len(slotKey(key, rw.readers-1)); n > sqllock.MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes leaves no room for the lock rows' suffix (at most %d)",
			sqllock.ErrInvalidKey, len(key), len(key)-(n-sqllock.MaxKeyLen))
	}
	return nil
}

// RLock blocks until key is held for reading or ctx ends (then the error
// matches sqllock.ErrNotAcquired and ctx.Err()). Readers overlap; a writer
// holding or waiting for key makes new readers wait.
func (rw *RWLock) RLock(ctx context.Context, key string) (*Lease, error) {
	return rw.acquire(ctx, key, false, true)
}

// TryRLock is RLock that returns an error matching sqllock.ErrNotAcquired
// at once when a writer holds or waits for key, or every reader row is
// held.
func (rw *RWLock) TryRLock(ctx context.Context, key string) (*Lease, error) {
	return rw.acquire(ctx, key, false, false)
}

// Lock blocks until key is held for writing: no other writer and no
// reader. From the moment it takes the writers' gate, new readers wait.
func (rw *RWLock) Lock(ctx context.Context, key string) (*Lease, error) {
	return rw.acquire(ctx, key, true, true)
}

// TryLock is Lock that returns an error matching sqllock.ErrNotAcquired at
// once when a writer or a reader holds key.
func (rw *RWLock) TryLock(ctx context.Context, key string) (*Lease, error) {
	return rw.acquire(ctx, key, true, false)
}

func (rw *RWLock) acquire(ctx context.Context, key string, write, wait bool) (got *Lease, err error) {
	op := "rlock"
	if write {
		op = "lock"
	}
	ctx, obs := rw.tel.StartAcquire(ctx, key, wait)
	defer func() { lease.EndAcquire(ctx, obs, got, 0, err) }()
	if err := rw.validate(key); err != nil {
		return nil, fmt.Errorf("rwlock: %s %q: %w", op, key, err)
	}
	owner, reentrant := sqllock.OwnerFrom(ctx)
	var gid uint64
	if !reentrant {
		gid = goid()
		if err := rw.selfWait(key, gid, write, wait); err != nil {
			return nil, fmt.Errorf("rwlock: %s %q: %w", op, key, err)
		}
	}
	if reentrant {
		hk := holdKey{key, owner}
		rw.mu.Lock()
		h := rw.holds[hk]
		switch {
		case h != nil && h.lease.Err() == nil && (h.write || !write):
			// A writer may read too; a reader reads again.
			h.n++
			rw.mu.Unlock()
			return &Lease{rw: rw, key: key, hk: hk, h: h}, nil
		case h != nil && h.lease.Err() == nil:
			rw.mu.Unlock()
			return nil, fmt.Errorf("rwlock: lock %q: %w: owner %q holds it for reading; a write would wait for itself", key, sqllock.ErrInvalidOption, owner)
		}
		rw.mu.Unlock()
	}
	// The rows are taken under owners of their own: reentrancy is ours.
	// A reader's row and a writer's gate record as the hold's lease (the
	// gate from when it is taken: it keeps readers out from then on, even
	// for a writer that then gives up); a reader's pass of the gate and a
	// writer's waits on reader rows record nothing.
	tctx := sqllock.WithOwner(ctx, identity.NewOwner())
	held, passing := telemetry.Within(tctx, rw.tel, key), telemetry.Within(tctx, nil, key)
	var h *hold
	if write {
		h, err = rw.write(held, passing, key, wait)
	} else {
		h, err = rw.read(held, passing, key, wait)
	}
	if err != nil {
		return nil, rowErr(op, key, err)
	}
	s := &Lease{rw: rw, key: key, h: h}
	rw.mu.Lock()
	if reentrant {
		s.hk = holdKey{key, owner}
		rw.holds[s.hk] = h
	} else {
		h.gid = gid
		rw.mine[key] = append(rw.mine[key], h)
	}
	rw.mu.Unlock()
	return s, nil
}

// selfWait refuses a blocking call that would wait for a hold its own
// goroutine took without an owner: a write after a read or a write of the
// key, a read after a write. Nothing else could end that wait but its
// context (unless the hold was handed to another goroutine to release,
// which this cannot see): better an error at once, saying why.
func (rw *RWLock) selfWait(key string, gid uint64, write, wait bool) error {
	if !wait {
		return nil // a try is refused at once anyway, as ErrNotAcquired
	}
	rw.mu.Lock()
	var mine []*hold
	for _, h := range rw.mine[key] {
		if h.gid == gid && (write || h.write) {
			mine = append(mine, h)
		}
	}
	rw.mu.Unlock()
	for _, h := range mine {
		if h.lease.Err() != nil {
			continue // lost: it keeps nobody waiting
		}
		held, would := "a read lock", "a write"
		if h.write {
			held = "the write lock"
		}
		if !write {
			would = "a read"
		}
		return fmt.Errorf("%w: this goroutine's context holds %s on this key, taken without sqllock.WithOwner, and %s would wait for it until the context ends; release it first, or take the key from another goroutine",
			sqllock.ErrInvalidOption, held, would)
	}
	return nil
}

// goid returns the id of the calling goroutine, from the first line of
// its stack trace ("goroutine 42 [running]:"). Go gives goroutines no
// other identity; it serves only to tell a caller that it would wait for
// a hold it took itself.
func goid() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	n, _ := strconv.ParseUint(string(b), 10, 64)
	return n
}

// rowPrefix matches what an error of tablelock says of one of the lock
// rows of a key: the package, the operation and the row's key, with its
// separator and suffix, and its token.
var rowPrefix = regexp.MustCompile(`tablelock: (?:[a-z]+ )?"(?:[^"\\]|\\.)*\\x1frw:(?:w|r[0-9]+)"(?: \(token [0-9]+\))?: `)

// keyError is an error of the rows underneath a hold, told of the
// caller's key: its text names neither the rows nor tablelock, and
// errors.Is and errors.As see the whole chain.
type keyError struct {
	text string
	err  error
}

func (e *keyError) Error() string { return e.text }
func (e *keyError) Unwrap() error { return e.err }

// rowErr wraps err, from an operation on key's lock rows, as rwlock's
// operation op on key.
func rowErr(op, key string, err error) error {
	text := rowPrefix.ReplaceAllString(err.Error(), "")
	text = strings.ReplaceAll(text, "tablelock: ", "")
	return &keyError{text: fmt.Sprintf("rwlock: %s %q: %s", op, key, text), err: err}
}

func (rw *RWLock) take(ctx context.Context, key string, wait bool) (*tablecore.Lease, error) {
	if wait {
		return rw.l.Acquire(ctx, key)
	}
	return rw.l.TryAcquire(ctx, key)
}

// read passes the writers' gate (held by a writer from the start of its
// wait: writer preference): it holds the gate while it takes a free
// reader row, and gives it back. The reader's token is its row's, drawn
// once the row is held. ctx records the row as the hold's lease; passing
// is ctx for the gate, which records nothing.
func (rw *RWLock) read(ctx, passing context.Context, key string, wait bool) (*hold, error) {
	gate, err := rw.take(passing, gateKey(key), wait)
	if err != nil {
		return nil, err
	}
	defer func() { _ = gate.Release(context.WithoutCancel(ctx)) }()
	bo := backoff.Exp{Min: time.Millisecond, Max: 50 * time.Millisecond}
	for {
		first := rand.IntN(rw.readers)
		for i := range rw.readers {
			slot, err := rw.take(ctx, slotKey(key, (first+i)%rw.readers), false)
			switch {
			case err == nil:
				if err := gate.Err(); err != nil {
					// The gate was lost before the row was taken (a pause
					// past its TTL): a writer may have counted the readers
					// since, without this one.
					_ = slot.Release(context.WithoutCancel(ctx))
					return nil, err
				}
				return &hold{n: 1, token: slot.Token(), lease: slot}, nil
			case !errors.Is(err, sqllock.ErrNotAcquired) || ctxend.Err(ctx) != nil:
				return nil, err
			}
		}
		if !wait {
			return nil, fmt.Errorf("%w: all %d reader rows held", sqllock.ErrNotAcquired, rw.readers)
		}
		if err := backoff.Sleep(ctx, bo.Next()); err != nil {
			return nil, errors.Join(sqllock.ErrNotAcquired, err)
		}
	}
}

// write takes the writers' gate, which keeps new readers out, then waits
// until none of the key's reader rows is held: one statement asks which
// are (the readers before it), and the writer waits for one of them to
// go, as a tablelock waiter of its row (woken by its release), and asks
// again. A dead reader's row comes back after its TTL.
//
// The token is the gate's. Every reader took its row while holding the
// gate, so before this writer took the gate and drew its token from the
// same counter: the writer's token is larger than every earlier reader's,
// and than every earlier writer's (their gates). ctx records the gate as
// the hold's lease; passing is ctx for the waits on reader rows, which
// record nothing.
func (rw *RWLock) write(ctx, passing context.Context, key string, wait bool) (*hold, error) {
	gate, err := rw.take(ctx, gateKey(key), wait)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*hold, error) {
		_ = gate.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	slots := rw.slotKeys(key)
	for {
		live, err := rw.tbl.Live(ctx, slots)
		switch {
		case err != nil && ctxend.Err(ctx) != nil:
			return fail(errors.Join(sqllock.ErrNotAcquired, ctxend.Err(ctx), err))
		case err != nil:
			return fail(err)
		case len(live) == 0:
			return &hold{write: true, n: 1, token: gate.Token(), lease: gate}, nil
		case !wait:
			return fail(fmt.Errorf("%w: %d readers hold it", sqllock.ErrNotAcquired, len(live)))
		}
		slot, err := rw.take(passing, live[0], true)
		if err != nil {
			return fail(err)
		}
		if err := slot.Release(passing); err != nil {
			return fail(err)
		}
	}
}

// Lease is one read or write hold of a key. Reentrant calls of one owner
// get Leases of their own over one hold, freed when the last is released.
type Lease struct {
	rw       *RWLock
	key      string
	hk       holdKey // zero without an owner
	h        *hold
	released bool
}

// Key returns the key held.
func (s *Lease) Key() string { return s.key }

// Write reports whether this is a write hold.
func (s *Lease) Write() bool { return s.h.write }

// Token returns the hold's fencing token: a writer's is larger than every
// token of the readers and writers that held the key before it, and a
// reader's larger than every earlier writer's.
func (s *Lease) Token() int64 { return s.h.token }

// Done is closed when the hold is released or lost.
func (s *Lease) Done() <-chan struct{} { return s.h.lease.Done() }

// Err is nil while held, matches sqllock.ErrLockLost after a loss and
// sqllock.ErrReleased after this Lease's Release.
func (s *Lease) Err() error {
	s.rw.mu.Lock()
	released := s.released
	s.rw.mu.Unlock()
	if err := s.h.lease.Err(); err != nil {
		return rowErr("lease", s.key, err)
	}
	if !released {
		return nil
	}
	return fmt.Errorf("rwlock: %q: %w", s.key, sqllock.ErrReleased)
}

// Extend moves the hold's expiry to at least d from now on the database
// clock, as tablelock.Lease.Extend does, for a holder about to block for
// longer than its TTL; it never shortens it, and renewal goes on. A hold
// is one row: a reader's own row (it gave the gate back once it had the
// row), a writer's gate (no reader row is held while it holds the key).
// So one statement extends all of it or none: a hold is never half
// extended. An owner's reentrant Leases share the row:
// extending one extends them all.
//
// It returns an error matching sqllock.ErrLockLost when the row is no
// longer this hold's (the hold then ends as lost: Done closed, Err the
// loss), sqllock.ErrReleased after this Lease's Release, and
// sqllock.ErrInvalidOption, changing nothing, when d <= 0. A transient
// failure is returned as is: the hold stays held.
func (s *Lease) Extend(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("rwlock: extend %q: %w: duration %v must be positive", s.key, sqllock.ErrInvalidOption, d)
	}
	s.rw.mu.Lock()
	released := s.released
	s.rw.mu.Unlock()
	if released {
		// The owner's other Leases may keep the row: not this one's to extend.
		return fmt.Errorf("rwlock: extend %q: %w", s.key, sqllock.ErrReleased)
	}
	if err := s.h.lease.Extend(ctx, d); err != nil {
		return rowErr("extend", s.key, err)
	}
	return nil
}

// Release gives this Lease back; the hold ends with its owner's last.
// A second call returns sqllock.ErrReleased.
func (s *Lease) Release(ctx context.Context) error {
	rw := s.rw
	rw.mu.Lock()
	if s.released {
		rw.mu.Unlock()
		return fmt.Errorf("rwlock: release %q: %w", s.key, sqllock.ErrReleased)
	}
	s.released = true
	s.h.n--
	last := s.h.n == 0
	if last && s.hk != (holdKey{}) && rw.holds[s.hk] == s.h {
		delete(rw.holds, s.hk)
	}
	if last && s.h.gid != 0 {
		mine := rw.mine[s.key]
		if i := slices.Index(mine, s.h); i >= 0 {
			mine = slices.Delete(mine, i, i+1)
		}
		if len(mine) == 0 {
			delete(rw.mine, s.key)
		} else {
			rw.mine[s.key] = mine
		}
	}
	rw.mu.Unlock()
	if !last {
		// The hold goes on for the owner's other Leases; a loss is told.
		if err := s.h.lease.Err(); err != nil && !errors.Is(err, sqllock.ErrReleased) {
			return rowErr("release", s.key, err)
		}
		return nil
	}
	if err := s.h.lease.Release(ctx); err != nil {
		return rowErr("release", s.key, err)
	}
	return nil
}
