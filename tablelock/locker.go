package tablelock

import (
	"context"
	"database/sql"
	"io"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/tablecore"
)

var (
	_ sqllock.Locker = (*Locker)(nil)
	_ io.Closer      = (*Locker)(nil)
)

// Locker hands out leases backed by rows of a lock table. It is safe for
// concurrent use. Close ends what it still holds (see the package doc).
type Locker struct {
	// c is the whole Locker; this type documents it for users. The
	// primitives built on the lock table hold a tablecore.Locker too.
	c *tablecore.Locker
}

// New returns a Locker over db for dialect d. It checks its options but does
// not touch the database; run migrations.Up first. New never closes db.
func New(db *sql.DB, d sqllock.Dialect, opts ...Option) (*Locker, error) {
	c, err := tablecore.New(db, d, opts...)
	if err != nil {
		return nil, err
	}
	return &Locker{c: c}, nil
}

// TTL is the lease length the Locker grants.
func (l *Locker) TTL() time.Duration { return l.c.TTL() }

// Acquire blocks until key is held by the owner in ctx (or a fresh random
// owner) or ctx ends; then the error matches both sqllock.ErrNotAcquired and
// ctx.Err().
func (l *Locker) Acquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return wrap(l.c.Acquire(ctx, key))
}

// TryAcquire takes key if it is free, expired or already held by the owner
// in ctx, and otherwise returns an error matching sqllock.ErrNotAcquired
// that names the holder's host.
func (l *Locker) TryAcquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return wrap(l.c.TryAcquire(ctx, key))
}

// wrap makes a won lease this package's; a nil *Lease would be a non-nil
// sqllock.Lease, so a failure returns a nil interface.
func wrap(s *tablecore.Lease, err error) (sqllock.Lease, error) {
	if err != nil {
		return nil, err
	}
	return &Lease{s: s}, nil
}

// Close ends the Locker, as the package doc says: it refuses later
// acquisitions with sqllock.ErrClosed, wakes the Acquires blocked in it,
// ends every lease it holds as lost and frees their keys, stops its
// listener and renewals and closes its prepared statements. Close never
// closes the *sql.DB; later calls return nil.
func (l *Locker) Close() error { return l.c.Close() }

// ReleaseKey releases one hold of key by the owner in ctx (see
// sqllock.WithOwner), for a process that restarted with a persistent owner
// and no longer has the lease. It returns an error matching
// sqllock.ErrNotHeld, and changes nothing, when that owner does not hold
// key; owners compare byte for byte, as keys do.
func (l *Locker) ReleaseKey(ctx context.Context, key string) error {
	return l.c.ReleaseKey(ctx, key)
}

// ForceRelease frees key for an operator, if it is still held under token:
// the holder List showed, whose Info.Token names it. The holder is not told
// at once: its next renewal finds the row no longer its own and its lease
// ends with sqllock.ErrLockLost.
//
// Every force release is audited: in the transaction that frees the key,
// a record of the holder freed (owner, host, token, holds), this process's
// hostname/pid, the [Reason] given and the time is written to the audit
// trail (migration 00009; read it with [AuditLog]). The key is freed if and
// only if the record is written.
//
// It reports whether it freed the key: false, with a nil error, when key is
// not held any more. When key changed hands since (another holder, under
// another token), it frees nothing and returns an error matching
// sqllock.ErrNotHeld that names the holder now.
func (l *Locker) ForceRelease(ctx context.Context, key string, token int64, opts ...ForceOption) (bool, error) {
	return l.c.ForceRelease(ctx, key, token, locktable.NewAudit(opts...))
}

// Info describes one held lock, as List reports it.
type Info struct {
	Key        string
	Owner      string // empty once released and only kept (jobguard's hold-at-least)
	Host       string // hostname/pid of the process that took it
	Holds      int    // reentrant hold count; 0 once released
	Token      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
	HeldFor    time.Duration // since AcquiredAt, on the database clock
}

// List returns the locks held now, by key.
func (l *Locker) List(ctx context.Context) ([]Info, error) {
	rows, err := l.c.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, len(rows))
	for i, r := range rows {
		out[i] = Info(r)
	}
	return out, nil
}
