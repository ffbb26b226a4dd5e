package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/leasestate"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

var _ sqllock.Lease = (*Lease)(nil)

// Lease is a row lock held by an open transaction. The transaction is the
// caller's to use (Tx): work done in it commits with Release, or is undone
// with Rollback, in the same step that frees the key.
type Lease struct {
	l       *Locker
	p       *pinned
	key     string
	token   int64
	session int64 // pg_backend_pid() or CONNECTION_ID() of the holding session
	// life tells this hold from others under the same session id (pids and
	// MariaDB connection ids are reused): the transaction's xid on
	// PostgreSQL, the server's start on MariaDB. See monitor.check.
	life int64
	st   leasestate.State // MarkReleased by Release or Rollback
}

func newLease(l *Locker, p *pinned, key string, token, session, life int64) *Lease {
	return &Lease{l: l, p: p, key: key, token: token, session: session, life: life}
}

// Key returns the key held.
func (s *Lease) Key() string { return s.key }

// Token returns the fencing token, strictly larger for each new holder of
// the key. It was drawn from the shared sequence inside the holding
// transaction, after the row lock was granted.
func (s *Lease) Token() int64 { return s.token }

// Tx returns the transaction that holds the row lock. Run the protected
// work in it; end it only with Release or Rollback, never with its own
// Commit or Rollback (which would free the key behind the lease's back: the
// lease then reports ErrLockLost).
func (s *Lease) Tx() *sql.Tx { return s.p.tx }

// Done is closed when the lease is released or lost.
func (s *Lease) Done() <-chan struct{} { return s.st.Done() }

// Err is nil while the lease is held. After a loss it matches
// sqllock.ErrLockLost, after Release or Rollback sqllock.ErrReleased.
func (s *Lease) Err() error { return s.st.Err() }

// lose ends a lease whose session or transaction is gone. The transaction
// is rolled back (it cannot commit any more) and its connection returned.
func (s *Lease) lose(cause string) {
	// Lose and MarkReleased share one lock: either Release sees the loss,
	// or the loss sees the Release.
	if !s.st.Lose(fmt.Errorf("rowlock: lease %q (token %d): %w: %s", s.key, s.token, sqllock.ErrLockLost, cause)) {
		return
	}
	s.l.cfg.logger.Warn("rowlock: lease lost", "key", s.key, "token", s.token, "cause", cause)
	s.l.mon.remove(s)
	// The rollback waits for any statement the holder still runs on the
	// dead session; do not hold up the monitor for it.
	go s.p.close(true)
}

// Release commits the lease's transaction, which frees the key and makes
// the work done in Tx durable in one step. The first call after a loss
// returns an error matching sqllock.ErrLockLost (the work was rolled back
// with the session), any second call sqllock.ErrReleased. A commit the
// database refuses (a deferred constraint, a serialization failure) is
// returned as is: the transaction is rolled back and the key free.
//
// A commit takes no context in database/sql; ctx is accepted for the
// sqllock.Lease contract and is not needed to make Release safe to defer.
func (s *Lease) Release(ctx context.Context) error {
	return s.finish("release", func(tx *sql.Tx) error { return tx.Commit() })
}

// Rollback undoes the work done in the lease's transaction and frees the
// key. It reports losses and repeated calls as Release does.
func (s *Lease) Rollback(ctx context.Context) error {
	return s.finish("rollback", func(tx *sql.Tx) error { return tx.Rollback() })
}

func (s *Lease) finish(op string, end func(*sql.Tx) error) error {
	if !s.st.MarkReleased() {
		return fmt.Errorf("rowlock: %s %q: %w", op, s.key, sqllock.ErrReleased)
	}
	lost := s.st.Err() // a loss, if any: none can come after MarkReleased
	s.l.mon.remove(s)
	if lost != nil {
		return lost
	}
	err := end(s.p.tx)
	s.p.tx = nil
	s.p.close(err != nil && sqlutil.IsConnLoss(err))
	switch {
	case err == nil:
		s.st.End(sqllock.ErrReleased)
		return nil
	case errors.Is(err, sql.ErrTxDone):
		err = fmt.Errorf("rowlock: %s %q: %w: the transaction was ended outside the lease", op, s.key, sqllock.ErrLockLost)
	case sqlutil.IsConnLoss(err):
		err = fmt.Errorf("rowlock: %s %q: %w: the session died, its work was rolled back: %v", op, s.key, sqllock.ErrLockLost, err)
	default:
		err = fmt.Errorf("rowlock: %s %q: %w", op, s.key, err)
	}
	s.st.End(sqllock.ErrReleased)
	return err
}

// TxFrom returns the transaction of the rowlock lease held by the
// sqllock.Do (or DoLease) that made ctx, so the protected work can run
// inside the transaction that holds the key.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	l, ok := sqllock.LeaseFrom(ctx)
	if !ok {
		return nil, false
	}
	s, ok := l.(*Lease)
	if !ok {
		return nil, false
	}
	return s.p.tx, true
}
