package tablecore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/telemetry"
)

var (
	_ sqllock.Lease    = (*Lease)(nil)
	_ sqllock.Extender = (*Lease)(nil)
)

type holdID struct{ key, owner string }

// hold is one row held by this Locker: the leases that share it (reentrant
// acquisitions by one owner) and the goroutine that renews it. The goroutine
// lives as long as the hold, not as long as any Acquire's context.
type hold struct {
	l     *Locker
	id    holdID
	token int64
	ctx   context.Context    // the renewals' statements; ends with the hold
	stop  context.CancelFunc // ends renewal
	// renewing starts renewLoop when the first renewal is due: a hold
	// released sooner (most are) never starts a goroutine.
	renewing *time.Timer
	// tel records its renewals under telKey: l's, or a primitive's
	// (telemetry.For); nil: none.
	tel    *telemetry.T
	telKey string

	mu       sync.Mutex
	deadline time.Time // the lease counts as lost from here on
	leases   map[*Lease]struct{}
	lost     bool
	cause    string // why it was lost, once lost
	stopped  bool
	gated    bool        // its key's gate is wanted (Locker.gate), until ungate
	armed    bool        // and was asked for, gateAfter into the hold
	arming   *time.Timer // asks for it
	// turn keeps its key's turn gate (locktable.TurnGate), when the take
	// came through it: the last release goes out on its session.
	turn *locktable.TurnGate
}

// Lease is a held row of the lock table; tablelock.Lease wraps it and
// documents its methods for users.
type Lease struct {
	base  lease.Base
	h     *hold
	owner string
}

// Key returns the key held.
func (s *Lease) Key() string { return s.base.Key() }

// Token returns the fencing token, strictly larger for each new holder of
// the key. Reentrant acquisitions by one owner share one token.
func (s *Lease) Token() int64 { return s.base.Token() }

// SpanContext returns the lease's span: sqllock.Do runs its work under it.
// It is invalid when tracing is off.
func (s *Lease) SpanContext() trace.SpanContext { return s.base.SpanContext() }

// Owner returns the owner recorded in the row.
func (s *Lease) Owner() string { return s.owner }

// Done is closed when the lease is released or lost.
func (s *Lease) Done() <-chan struct{} { return s.base.Done() }

// Err is tablelock.Lease.Err: nil while held; it checks the renewal
// deadline itself.
func (s *Lease) Err() error {
	s.tellLoss()
	return s.base.Err()
}

// tellLoss ends the lease as lost if its hold is lost, before the
// goroutine that found the loss has told every lease (it tells them last).
func (s *Lease) tellLoss() {
	if cause := s.h.checkDeadline(); cause != "" {
		s.base.Lose(s.base.Lost(cause))
	}
}

// Release is tablelock.Lease.Release: it gives one hold of the key back.
func (s *Lease) Release(ctx context.Context) error {
	s.tellLoss() // a loss that came first is the one Release reports
	return s.base.Release(ctx, s.free)
}

// Extend is tablelock.Lease.Extend: it moves the row's expiry to at least
// d from now on the database clock, and the loss deadline with it.
func (s *Lease) Extend(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("tablelock: extend %q: %w: duration %v must be positive", s.Key(), sqllock.ErrInvalidOption, d)
	}
	if err := s.Err(); err != nil {
		return err
	}
	h, l := s.h, s.h.l
	start, ok, err := l.tbl.Renew(ctx, h.id.key, h.id.owner, h.token, d)
	switch {
	case err != nil:
		return fmt.Errorf("tablelock: extend %q: %w", s.Key(), err)
	case !ok:
		h.lose("the row is no longer ours (expired, taken or deleted)", true)
		if err := s.base.Err(); err != nil {
			return err
		}
		return s.base.Lost("the row is no longer ours (expired, taken or deleted)")
	}
	h.mu.Lock()
	if dl := start.Add(d - l.cfg.Margin); !h.stopped && dl.After(h.deadline) {
		h.deadline = dl
	}
	h.mu.Unlock()
	return s.base.Err() // released meanwhile
}

// free is Release's own work: drop the hold, and give its row back.
func (s *Lease) free(ctx context.Context, lost error) error {
	h, l := s.h, s.h.l
	last := h.detach(s)
	if last {
		h.settle()
	}
	if lost != nil && l.isClosed() {
		return nil // Close freed the row
	}
	var err error
	if g := h.takeTurn(last); g != nil {
		err = g.Release(ctx, s.owner, s.Token(), 0)
	} else {
		err = l.tbl.Release(ctx, s.Key(), s.owner, s.Token(), 0)
	}
	l.waiters.Signal(s.Key())
	if last {
		h.ungate() // after the release committed: a waiter let through finds the key free
	}
	switch {
	case lost != nil:
		return nil // the loss is the answer
	case errors.Is(err, sqllock.ErrLockLost):
		return s.base.Lost("the row is no longer ours (expired, taken or deleted)")
	case err != nil:
		return fmt.Errorf("tablelock: release %q: %w (the row expires by itself)", s.Key(), err)
	}
	return nil
}

// newLease records a won take, or returns nil when the Locker is closed.
// start is when the take was sent: the database set the expiry from a
// clock reading no earlier than that, so start+TTL-margin is before the
// row could be taken by another.
func (l *Locker) newLease(ctx context.Context, key, owner string, a locktable.Attempt, start time.Time) *Lease {
	deadline := start.Add(l.cfg.TTL - l.cfg.Margin)
	// By the deadline at the latest: a take whose answer came late (a
	// pause) leaves less than a renew interval, and the loop declares the
	// loss on time.
	return l.newLeaseUntil(ctx, key, owner, a, deadline, time.Until(deadline))
}

// newLeaseUntil is newLease with the loss deadline given, and the first
// renewal due after renew at the latest: a grant held without a claim
// (holdGrant) has its claim window only until that renewal.
func (l *Locker) newLeaseUntil(ctx context.Context, key, owner string, a locktable.Attempt, deadline time.Time, renew time.Duration) *Lease {
	s := &Lease{owner: owner}
	s.base.Init("tablelock", key, a.Token)
	id := holdID{key, owner}

	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	// Before the lease can be lost: Close and the renewals find it only
	// through l.holds.
	s.base.Observe(ctx, l.tel)
	h := l.holds[id]
	if h != nil {
		h.mu.Lock()
		if h.token == a.Token && !h.lost && !h.stopped {
			h.leases[s] = struct{}{}
			if deadline.After(h.deadline) {
				h.deadline = deadline
			}
			h.mu.Unlock()
			l.mu.Unlock()
			s.h = h
			return s
		}
		h.mu.Unlock()
		// A different token means the old hold expired and this owner took
		// the key afresh; the old leases are lost.
		defer h.lose("the key was taken again with a new token", true)
	}
	h = &hold{
		l: l, id: id, token: a.Token, deadline: deadline,
		leases: map[*Lease]struct{}{s: {}},
	}
	h.tel, h.telKey = l.tel.For(ctx, key)
	h.ctx, h.stop = context.WithCancel(context.Background())
	if l.gate != nil {
		h.gated = true
		h.arming = time.AfterFunc(gateAfter, h.arm)
	}
	l.holds[id] = h
	l.renewers.Add(1) // Done by renewLoop, or by halt if it never starts
	h.mu.Lock()       // halt reads h.renewing under h.mu, maybe in renewLoop already
	h.renewing = time.AfterFunc(min(l.cfg.Renew, renew), h.renewLoop)
	h.mu.Unlock()
	l.mu.Unlock()
	s.h = h
	return s
}

// detach removes a released lease from its hold, and ends the hold with
// its last lease; it reports whether it was the last.
func (h *hold) detach(s *Lease) bool {
	h.mu.Lock()
	delete(h.leases, s)
	last := len(h.leases) == 0
	if last {
		h.halt()
	}
	h.mu.Unlock()
	if last {
		h.forget()
	}
	return last
}

// gateAfter is how long a hold lasts before it asks for its key's gate: a
// gate costs two statements on the gate session, which holds released at
// once (most holds under load) would pay for nothing, and a waiter that
// finds a younger holder polls, as without gates (see blockFor).
const gateAfter = 2 * time.Millisecond

// keepTurn gives the hold g, its key's turn gate, unless it has one: it
// reports whether it took it.
func (h *hold) keepTurn(g *locktable.TurnGate) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.turn != nil || h.stopped {
		return false
	}
	h.turn = g
	return true
}

// takeTurn returns the hold's turn gate, once, for its last release
// (last) or, after a loss, to be let go of; nil when it has none.
func (h *hold) takeTurn(last bool) *locktable.TurnGate {
	if !last {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.turn
	h.turn = nil
	return g
}

// arm asks for the hold's gate, unless it ended first.
func (h *hold) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gated && !h.armed {
		h.armed = true
		h.l.gate.Arm(h.id.key) // under h.mu: never after its Disarm
	}
}

// settle cancels the hold's gate if it was not asked for yet: the hold
// ends now, and its release is no reason to take a gate.
func (h *hold) settle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gated && !h.armed {
		h.gated = false
		h.arming.Stop()
	}
}

// ungate lets go of the hold's gate, once: the row is free, or no longer
// this holder's.
func (h *hold) ungate() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.gated {
		return
	}
	h.gated = false
	h.arming.Stop()
	if h.armed {
		h.l.gate.Disarm(h.id.key)
	}
}

// halt ends renewal. h.mu held.
func (h *hold) halt() {
	if !h.stopped {
		h.stopped = true
		h.stop()
		if h.renewing.Stop() {
			h.l.renewers.Done() // renewLoop will not run
		}
	}
}

// forget drops the hold from its Locker. h.mu must not be held: the Locker's
// mutex is taken before a hold's, never after.
func (h *hold) forget() {
	h.l.mu.Lock()
	if h.l.holds[h.id] == h {
		delete(h.l.holds, h.id)
	}
	h.l.mu.Unlock()
}

// checkDeadline declares the loss if the renewal deadline has passed,
// whether or not the renewal goroutine has run since.
// It returns the cause once the hold is lost, here or by another
// goroutine that may not have told the leases yet.
func (h *hold) checkDeadline() (cause string) {
	h.mu.Lock()
	past := !h.stopped && time.Now().After(h.deadline)
	h.mu.Unlock()
	if past {
		h.lose("not renewed before the safety margin", true)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cause
}

// lose ends every lease of the hold as lost, for cause, and its renewal.
func (h *hold) lose(cause string, warn bool) {
	h.mu.Lock()
	if h.lost || h.stopped {
		h.mu.Unlock()
		return
	}
	h.lost, h.cause = true, cause
	leases := make([]*Lease, 0, len(h.leases))
	for s := range h.leases {
		leases = append(leases, s)
	}
	h.halt()
	h.mu.Unlock()
	h.forget()
	if !h.l.isClosed() {
		h.ungate() // Close lets go of every gate after freeing the rows
		if g := h.takeTurn(true); g != nil {
			g.Let()
		}
	}
	if warn {
		h.l.cfg.Logger.Warn("tablelock: lease lost", telemetry.AttrKey, h.id.key, telemetry.AttrToken, h.token, telemetry.AttrCause, telemetry.Cause(cause), telemetry.LogError, cause)
	}
	for _, s := range leases {
		s.base.Lose(s.base.Lost(cause))
	}
}

// event records a background event on the spans of the hold's leases.
func (h *hold) event(name string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.leases {
		s.base.Event(name, err)
	}
}

// renewLoop extends the row every renew interval, from the first renewal
// on (h.renewing waited the interval before it). Transient errors are
// retried until the deadline; only a row that is no longer ours, a
// permanent error, or a spent deadline ends the lease.
func (h *hold) renewLoop() {
	l := h.l
	defer l.renewers.Done()
	next := time.NewTimer(0)
	defer next.Stop()
	retry := l.cfg.Renew / 8
	var failed error // the last renewal's error, for the loss it leads to
	for {
		h.mu.Lock()
		dl := h.deadline
		h.mu.Unlock()
		expiry := time.NewTimer(time.Until(dl))
		select {
		case <-h.ctx.Done():
			expiry.Stop()
			return
		case <-expiry.C:
			h.mu.Lock()
			extended := time.Now().Before(h.deadline) // by Extend meanwhile
			h.mu.Unlock()
			if extended {
				continue
			}
			cause := "not renewed before the safety margin"
			if failed != nil {
				cause += ": " + failed.Error()
			}
			h.lose(cause, true)
			return
		case <-next.C:
		}
		expiry.Stop()

		h.mu.Lock()
		dl = h.deadline
		h.mu.Unlock()
		ctx, cancel := context.WithDeadline(h.ctx, dl)
		start, ok, err := l.tbl.Renew(ctx, h.id.key, h.id.owner, h.token, l.cfg.TTL)
		cancel()
		switch {
		case h.ctx.Err() != nil:
			return // released or lost meanwhile
		case err == nil && ok:
			h.tel.Renewal(h.telKey, telemetry.RenewOK)
			h.mu.Lock()
			if d := start.Add(l.cfg.TTL - l.cfg.Margin); d.After(h.deadline) {
				h.deadline = d
			}
			h.mu.Unlock()
			next.Reset(l.cfg.Renew)
		case err == nil:
			h.tel.Renewal(h.telKey, telemetry.RenewFailed)
			h.lose("the row is no longer ours (expired, taken or deleted)", true)
			return
		case dberr.IsRetryable(err) || errors.Is(err, context.DeadlineExceeded):
			l.cfg.Logger.Info("tablelock: renewal failed, retrying", telemetry.AttrKey, h.id.key, telemetry.AttrToken, h.token, telemetry.LogError, err.Error())
			h.tel.Renewal(h.telKey, telemetry.RenewRetried)
			h.event("sqllock.renewal.retried", err)
			failed = err
			next.Reset(retry)
		default:
			h.tel.Renewal(h.telKey, telemetry.RenewFailed)
			h.lose(fmt.Sprintf("renewal failed: %v", err), true)
			return
		}
	}
}
