package jobguard

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
	"github.com/sqllock/sqllock/internal/telemetry"
)

var _ sqllock.Extender = (*Lease)(nil)

// Lease is one run's hold on a job. It ends at AtMost from its start (or
// from its last extension, with Job.KeepAlive), and counts itself lost
// AtMost/10 before that, so its holder learns of the loss before another
// replica could take the job.
type Lease struct {
	base  lease.Base
	g     *Guard
	job   Job
	owner string

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer

	// keep-alive, with Job.KeepAlive: stop ends it, alive is closed when
	// it has.
	stop  chan struct{}
	alive chan struct{}
}

// newLease records a won take. start is when the statement was sent: the
// database set the expiry from a clock reading no earlier than that.
func (g *Guard) newLease(ctx context.Context, job Job, owner string, token int64, start time.Time) *Lease {
	s := &Lease{g: g, job: job, owner: owner}
	s.base.Init("jobguard", job.Name, token)
	s.base.Observe(ctx, g.tel)
	s.deadline = s.deadlineFrom(start)
	s.timer = time.AfterFunc(time.Until(s.deadline), s.expire)
	if job.KeepAlive {
		s.stop, s.alive = make(chan struct{}), make(chan struct{})
		go s.keepAlive()
	}
	return s
}

// deadlineFrom is when a hold sent at start counts as lost.
func (s *Lease) deadlineFrom(start time.Time) time.Time {
	return start.Add(s.job.AtMost - s.job.AtMost/10)
}

func (s *Lease) expire() {
	s.lose(fmt.Sprintf("ran past its hold-at-most %v", s.job.AtMost))
}

func (s *Lease) lose(cause string) {
	s.base.Lose(s.base.Lost(cause))
}

// pastDeadline reports whether the lease's deadline has passed.
func (s *Lease) pastDeadline() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().After(s.deadline)
}

// keepAlive extends the hold every AtMost/3 until the lease ends. A
// failed extension is retried until the deadline; a row that is no longer
// this run's ends the lease at once.
func (s *Lease) keepAlive() {
	defer close(s.alive)
	period := s.job.AtMost / 3
	next := time.NewTimer(period)
	defer next.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.base.Done():
			return
		case <-next.C:
		}
		ok, err := s.extend(context.Background(), s.job.AtMost)
		tel := s.g.tel
		switch {
		case err == nil && ok:
			tel.Renewal(s.job.Name, telemetry.RenewOK)
			next.Reset(period)
		case err == nil:
			tel.Renewal(s.job.Name, telemetry.RenewFailed)
			s.lose("the row is no longer this run's (force-released by an operator?)")
			return
		case dberr.IsRetryable(err) || errors.Is(err, context.DeadlineExceeded):
			tel.Renewal(s.job.Name, telemetry.RenewRetried)
			s.base.Event("sqllock.renewal.retried", err)
			next.Reset(period / 8) // the expiry timer ends the lease if none succeeds
		default:
			tel.Renewal(s.job.Name, telemetry.RenewFailed)
			s.lose(fmt.Sprintf("keep-alive failed: %v", err))
			return
		}
	}
}

// extend moves the run's expiry to at least d from now, and the lease's
// deadline with it (AtMost/10 before it). It reports false when the row is
// no longer this run's. Keep-alive (d = AtMost) and Extend share it.
func (s *Lease) extend(ctx context.Context, d time.Duration) (bool, error) {
	s.mu.Lock()
	dl := s.deadline
	s.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()
	start, ok, err := s.g.tbl.Renew(ctx, s.job.Name, s.owner, s.Token(), d)
	if err != nil || !ok {
		return ok, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := start.Add(d - s.job.AtMost/10); d.After(s.deadline) {
		s.deadline = d
		s.timer.Reset(time.Until(d))
	}
	return true, nil
}

// SpanContext returns the lease's span: sqllock.DoLease (and so Run) runs
// the job under it. It is invalid when tracing is off.
func (s *Lease) SpanContext() trace.SpanContext { return s.base.SpanContext() }

// Extend moves the run's expiry to at least d from now on the database
// clock, for a run that will outlast its AtMost; it never shortens it. The
// run's context and Done follow the new expiry, AtMost/10 before it. With
// Job.KeepAlive the keep-alive goes on and never shortens it either. If
// the runner dies, the job stays taken until the extended expiry
// (ForceRelease frees it sooner); Release keeps it until AtLeast as ever.
//
// It returns an error matching sqllock.ErrLockLost when the row is no
// longer this run's (the lease then ends as lost), the loss itself after
// an earlier loss, sqllock.ErrReleased after Release, and
// sqllock.ErrInvalidOption, changing nothing, when d <= 0.
func (s *Lease) Extend(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("jobguard: extend %q: %w: duration %v must be positive", s.Key(), sqllock.ErrInvalidOption, d)
	}
	if err := s.Err(); err != nil {
		return err
	}
	ok, err := s.extend(ctx, d)
	switch {
	case err != nil:
		return fmt.Errorf("jobguard: extend %q: %w", s.Key(), err)
	case !ok:
		s.lose("the row is no longer this run's (expired or force-released)")
	}
	return s.base.Err()
}

// Key returns the job's name.
func (s *Lease) Key() string { return s.base.Key() }

// Token returns the run's fencing token, larger than any earlier run's.
func (s *Lease) Token() int64 { return s.base.Token() }

// Done is closed when the lease is released or its hold-at-most is spent.
func (s *Lease) Done() <-chan struct{} { return s.base.Done() }

// Err is nil while the run holds the job, matches sqllock.ErrLockLost once
// it held it too long, and sqllock.ErrReleased after Release. It checks the
// deadline itself, so a runner resumed after a pause learns of the loss
// before the timer fires.
func (s *Lease) Err() error {
	if s.pastDeadline() {
		s.expire()
	}
	return s.base.Err()
}

// Release ends the run: the job stays taken until AtLeast has passed since
// the run started, and is free from then on. The first call after a loss
// returns an error matching sqllock.ErrLockLost (and still frees the row if
// no other runner has it), any second call sqllock.ErrReleased. It runs
// detached from ctx's cancellation, bounded by its own timeout.
func (s *Lease) Release(ctx context.Context) error {
	_ = s.Err() // a loss that came first is the one Release reports
	return s.base.Release(ctx, s.free)
}

// free is Release's own work: stop the keep-alive, give the row back, kept
// until AtLeast.
func (s *Lease) free(ctx context.Context, lost error) error {
	s.mu.Lock()
	s.timer.Stop()
	s.mu.Unlock()
	if s.stop != nil {
		close(s.stop)
		<-s.alive
	}
	err := s.g.tbl.Release(ctx, s.job.Name, s.owner, s.Token(), s.job.AtLeast)
	switch {
	case lost != nil:
		return nil // the loss is the answer
	case errors.Is(err, sqllock.ErrLockLost):
		return s.base.Lost("the row is no longer this run's (force-released by an operator?)")
	case err != nil:
		return fmt.Errorf("jobguard: release %q: %w (the job frees itself at its hold-at-most)", s.job.Name, err)
	}
	return nil
}
