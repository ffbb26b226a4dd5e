package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/tablecore"
	"github.com/sqllock/sqllock/internal/telemetry"
	"github.com/sqllock/sqllock/tablelock"
)

// Table is the table of leaderships migration 00009 creates.
const Table = "sqllock_elections"

// KeyPrefix starts the lock key of an election's leadership lease in the
// lock table: "sqllock.election/" + name.
const KeyPrefix = "sqllock.election/"

// ErrNoLeader: the election has no live leader now.
var ErrNoLeader = errors.New("no leader")

var (
	_ sqllock.Extender = (*Leadership)(nil)
	_ io.Closer        = (*Election)(nil)
)

// Election runs elections on db: at most one leader per name at a time,
// each leadership a lease whose token is its term. It is safe for
// concurrent use; Close it when done.
type Election struct {
	l    *tablecore.Locker
	tel  *telemetry.T // each Campaign once, a leadership as its lease
	db   *sql.DB
	q    queries
	poll time.Duration // Observe's polling where nothing is announced
	// safetyPoll is Observe's polling while it hears announcements: only
	// for one that went unheard some way the listener did not notice.
	safetyPoll time.Duration
	done       chan struct{} // closed by Close
	closeOnce  sync.Once
}

// queries are one dialect's statements of the term table. start is where
// Observe begins: the term before the live leader's, or the newest term
// when none leads, read in one statement so that both come from one
// snapshot. strict, on the MySQL path, tells whether the session's
// sql_mode is strict. announces: insert also announces the term, and its
// arguments end with the channel and the payload (termPayload).
type queries struct {
	insert, leader, since, start, strict string
	announces                            bool
}

// stores are the term table's statements by dialect, each registered by
// its store_<dialect>.go file: the rest of the package asks them, never
// the dialect.
var stores = map[sqllock.Dialect]queries{}

// Observe's polling intervals; see Election.poll and safetyPoll.
const (
	pollInterval       = 100 * time.Millisecond
	safetyPollInterval = 10 * time.Second
)

// termPayload is the announcement of a new term of name on PostgreSQL:
// the payload of a NOTIFY on the lock table's channel, beside the keys it
// announces there (a lock key equal to it only gets a spurious wake-up).
func termPayload(name string) string { return "sqllock.election.term/" + name }

// New returns an Election over db for dialect d. opts are tablelock's
// (the leadership lease's TTL, renewal and margin); the leases live in
// tablelock's default table. Its metrics and spans carry sqllock.strategy
// "election", one acquisition per Campaign. It does not touch the
// database; run migrations.Up first. New never closes db.
func New(db *sql.DB, d sqllock.Dialect, opts ...tablelock.Option) (*Election, error) {
	l, err := tablecore.New(db, d, opts...)
	if err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	tel := telemetry.New("election", d.String(), l.Telemetry())
	e := &Election{l: l, tel: tel, db: db, poll: pollInterval, safetyPoll: safetyPollInterval, done: make(chan struct{})}
	// Every dialect tablecore.New accepts has its store.
	e.q = stores[d]
	return e, nil
}

// Close ends every leadership this Election holds (as lost), refuses
// later campaigns and ends its Observes. It never closes the *sql.DB.
func (e *Election) Close() error {
	e.closeOnce.Do(func() { close(e.done) })
	return e.l.Close()
}

func key(name string) string { return KeyPrefix + name }

// MaxValue is the longest value, in bytes, that Campaign takes: what
// MySQL's TEXT column holds.
const MaxValue = 1<<16 - 1

func validate(name, value string) error {
	if err := sqllock.ValidateKey(key(name)); err != nil {
		return fmt.Errorf("%w (names are at most %d bytes)", err, sqllock.MaxKeyLen-len(KeyPrefix))
	}
	switch {
	case len(value) > MaxValue:
		return fmt.Errorf("%w: value of %d bytes (at most %d, what MySQL's TEXT holds)", sqllock.ErrInvalidOption, len(value), MaxValue)
	case !utf8.ValidString(value):
		return fmt.Errorf("%w: value is not valid UTF-8", sqllock.ErrInvalidOption)
	case strings.IndexByte(value, 0) >= 0:
		return fmt.Errorf("%w: value contains a NUL byte (PostgreSQL's text holds none)", sqllock.ErrInvalidOption)
	}
	return nil
}

// checkStrict refuses a session whose sql_mode is not strict, where MySQL
// would store a value it cannot hold altered rather than refuse it.
func (e *Election) checkStrict(ctx context.Context) error {
	if e.q.strict == "" {
		return nil
	}
	var mode string
	if err := e.db.QueryRowContext(ctx, e.q.strict).Scan(&mode); err != nil {
		return err
	}
	if !strings.Contains(mode, "STRICT") {
		return fmt.Errorf("%w: the session's sql_mode %q is not strict (add STRICT_TRANS_TABLES), so a value could be stored altered", sqllock.ErrInvalidOption, mode)
	}
	return nil
}

// Campaign blocks until this caller leads the election name, or ctx ends
// (then the error matches sqllock.ErrNotAcquired and ctx.Err()). It
// returns the leadership: a lease whose token is the term, strictly larger
// than every earlier leader's, published with value for Leader and
// Observe. Leadership ends with Resign or with the lease's loss (Done).
//
// value is stored as given or refused with an error matching
// sqllock.ErrInvalidOption: one that is not UTF-8, holds a NUL byte or is
// longer than [MaxValue] bytes is refused before anything is written. On
// the MySQL family the term's statement is strict whatever the session's
// sql_mode: sqllock.MariaDB sets it for the statement, and
// sqllock.MySQL, which MySQL 8 runs too, refuses a session that is
// not strict before it campaigns. A character the column's character set
// lacks is refused by the server after the lease was won, and the lease
// released.
func (e *Election) Campaign(ctx context.Context, name, value string) (ld *Leadership, err error) {
	ctx, obs := e.tel.StartAcquire(ctx, key(name), true)
	defer func() { lease.EndAcquire(ctx, obs, ld, 0, err) }()
	if err := validate(name, value); err != nil {
		return nil, fmt.Errorf("election: campaign %q: %w", name, err)
	}
	if err := e.checkStrict(ctx); err != nil {
		return nil, fmt.Errorf("election: campaign %q: %w", name, err)
	}
	ctx = sqllock.WithOwner(ctx, identity.NewOwner()) // one leadership per call
	ctx = telemetry.Within(ctx, e.tel, key(name))
	won, err := e.l.Acquire(ctx, key(name))
	if err != nil {
		return nil, fmt.Errorf("election: campaign %q: %w", name, err)
	}
	// The term row goes in after the lease is won: Leader joins it to the
	// live lease, so a row of a term that never led (or led no more)
	// names no leader.
	args := []any{name, won.Token(), value}
	if e.q.announces {
		args = append(args, dialect.NotifyChannel(tablelock.DefaultTable), termPayload(name))
	}
	res, err := e.db.ExecContext(ctx, e.q.insert, args...)
	if err == nil && e.q.strict != "" {
		if n, rerr := res.RowsAffected(); rerr != nil {
			err = rerr
		} else if n == 0 {
			err = fmt.Errorf("%w: the session's sql_mode is not strict (add STRICT_TRANS_TABLES), so a value could be stored altered", sqllock.ErrInvalidOption)
		}
	}
	if err != nil {
		_ = won.Release(ctx)
		if dberr.IsUnstorable(err) {
			err = fmt.Errorf("%w: the database cannot store the value as given: %w", sqllock.ErrInvalidOption, err)
		}
		return nil, fmt.Errorf("election: campaign %q: publish term %d: %w", name, won.Token(), err)
	}
	return &Leadership{name: name, value: value, lease: won}, nil
}

// Leader describes one leadership.
type Leader struct {
	Value string
	Term  int64     // the leadership lease's token
	Since time.Time // on the database clock, UTC
}

// Leader returns the live leader of name, or an error matching
// ErrNoLeader when there is none (never one, resigned, or its lease
// expired).
func (e *Election) Leader(ctx context.Context, name string) (Leader, error) {
	if err := validate(name, ""); err != nil {
		return Leader{}, fmt.Errorf("election: leader %q: %w", name, err)
	}
	var ld Leader
	var since any
	err := e.db.QueryRowContext(ctx, e.q.leader, name, key(name)).Scan(&ld.Value, &ld.Term, &since)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Leader{}, fmt.Errorf("election: leader %q: %w", name, ErrNoLeader)
	case err != nil:
		return Leader{}, fmt.Errorf("election: leader %q: %w", name, err)
	}
	ld.Since = dialect.ToTime(since)
	return ld, nil
}

// Observe delivers every leadership of name from the current one on, in
// term order, each once, until ctx ends or the Election is closed; then
// the channel is closed. Every term leaves a row in the table of
// leaderships, so a leadership is delivered even if it ended before
// Observe looked.
//
// On PostgreSQL (with the pgx stdlib driver and notifications on) Observe
// looks when a new term is announced: the statement that publishes a term
// sends a NOTIFY, heard through the Election's listening session, the one
// its campaigners wait on. It also looks after that session failed and is
// back, and every 10s in case an announcement went unheard some other
// way. Elsewhere it polls every 100ms. A database error is retried at the
// next look.
func (e *Election) Observe(ctx context.Context, name string) (<-chan Leader, error) {
	if err := validate(name, ""); err != nil {
		return nil, fmt.Errorf("election: observe %q: %w", name, err)
	}
	select {
	case <-e.done:
		return nil, fmt.Errorf("election: observe %q: %w", name, sqllock.ErrClosed)
	default:
	}
	// Listen before the first read: a term published after it is heard.
	var wake <-chan struct{}
	stop, poll := func() {}, e.poll
	if ln := e.l.Listener(); ln != nil {
		w, s, err := ln.Watch(ctx, termPayload(name))
		switch {
		case err == nil:
			wake, stop, poll = w, s, e.safetyPoll
		case ctxend.Err(ctx) != nil:
			return nil, fmt.Errorf("election: observe %q: %w", name, errors.Join(err, ctxend.Err(ctx)))
		}
		// Any other error: the driver cannot listen; poll.
	}
	// Deliver from the live leader on, or after the newest term when none
	// leads: one statement, so a term published meanwhile is either the
	// live leader or above the newest.
	var last int64
	if err := e.db.QueryRowContext(ctx, e.q.start, key(name), name).Scan(&last); err != nil {
		stop()
		return nil, fmt.Errorf("election: observe %q: %w", name, err)
	}
	ch := make(chan Leader)
	go func() {
		defer close(ch)
		defer stop()
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			got, err := e.after(ctx, name, last)
			if err == nil {
				for _, ld := range got {
					select {
					case ch <- ld:
						last = ld.Term
					case <-ctx.Done():
						return
					case <-e.done:
						return
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-e.done:
				return
			case <-t.C:
			case <-wake: // nil when polling
			}
		}
	}()
	return ch, nil
}

// after returns the leaderships of name with a term above term, in order.
func (e *Election) after(ctx context.Context, name string, term int64) ([]Leader, error) {
	rows, err := e.db.QueryContext(ctx, e.q.since, name, term)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Leader
	for rows.Next() {
		var ld Leader
		var since any
		if err := rows.Scan(&ld.Value, &ld.Term, &since); err != nil {
			return nil, err
		}
		ld.Since = dialect.ToTime(since)
		out = append(out, ld)
	}
	return out, rows.Err()
}

// Leadership is a won election: a lease whose token is the term.
type Leadership struct {
	name, value string
	lease       *tablecore.Lease
}

// Name returns the election's name (Key returns the lease's lock key).
func (s *Leadership) Name() string { return s.name }

// Value returns the value published with the leadership.
func (s *Leadership) Value() string { return s.value }

// Term returns the term: the lease's fencing token.
func (s *Leadership) Term() int64 { return s.lease.Token() }

// Key returns the leadership lease's lock key.
func (s *Leadership) Key() string { return s.lease.Key() }

// Token returns the term, for the fence.
func (s *Leadership) Token() int64 { return s.lease.Token() }

// Done is closed when the leadership ends: resigned or lost.
func (s *Leadership) Done() <-chan struct{} { return s.lease.Done() }

// Err is nil while leading, matches sqllock.ErrLockLost after a loss and
// sqllock.ErrReleased after Resign.
func (s *Leadership) Err() error { return s.lease.Err() }

// Resign gives up the leadership; the next campaigner takes over at once.
func (s *Leadership) Resign(ctx context.Context) error { return s.lease.Release(ctx) }

// Release is Resign, for code that takes any sqllock.Lease.
func (s *Leadership) Release(ctx context.Context) error { return s.Resign(ctx) }

// Extend extends the leadership lease, as tablelock.Lease.Extend.
func (s *Leadership) Extend(ctx context.Context, d time.Duration) error {
	return s.lease.Extend(ctx, d)
}
