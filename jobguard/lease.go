package jobguard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/leasestate"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

var _ sqllock.Lease = (*Lease)(nil)

// Lease is one run's hold on a job. It is never renewed: it ends at
// AtMost, and counts itself lost AtMost/10 before that, so its holder learns
// of the loss before another replica could take the job.
type Lease struct {
	g        *Guard
	job      Job
	token    int64
	deadline time.Time
	timer    *time.Timer
	st       leasestate.State
}

// newLease records a won attempt. start is when the statement was sent: the
// database set locked_until from a clock reading no earlier than that.
func (g *Guard) newLease(job Job, token int64, start time.Time) *Lease {
	s := &Lease{g: g, job: job, token: token}
	s.deadline = start.Add(job.AtMost - job.AtMost/10)
	s.timer = time.AfterFunc(time.Until(s.deadline), s.expire)
	return s
}

func (s *Lease) expire() {
	s.st.End(fmt.Errorf("jobguard: run of %q (token %d): %w: ran past its hold-at-most %v", s.job.Name, s.token, sqllock.ErrLockLost, s.job.AtMost))
}

// Key returns the job's name.
func (s *Lease) Key() string { return s.job.Name }

// Token returns the run's fencing token, larger than any earlier run's.
func (s *Lease) Token() int64 { return s.token }

// Done is closed when the lease is released or its hold-at-most is spent.
func (s *Lease) Done() <-chan struct{} { return s.st.Done() }

// Err is nil while the run holds the job, matches sqllock.ErrLockLost once
// it held it too long, and sqllock.ErrReleased after Release. It checks the
// deadline itself, so a runner resumed after a pause learns of the loss
// before the timer fires.
func (s *Lease) Err() error {
	if time.Now().After(s.deadline) {
		s.expire()
	}
	return s.st.Err()
}

// Release ends the run: the job stays taken until AtLeast has passed since
// the run started, and is free from then on. The first call after a loss
// returns an error matching sqllock.ErrLockLost (and still frees the row if
// no other runner has it), any second call sqllock.ErrReleased. It runs
// detached from ctx's cancellation, bounded by its own timeout.
func (s *Lease) Release(ctx context.Context) error {
	if !s.st.MarkReleased() {
		return fmt.Errorf("jobguard: release %q: %w", s.job.Name, sqllock.ErrReleased)
	}
	s.timer.Stop()
	lostErr := s.Err()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	n, relErr := s.g.release(ctx, s.job, s.token)
	s.st.End(sqllock.ErrReleased)
	switch {
	case lostErr != nil:
		return lostErr
	case relErr != nil:
		return fmt.Errorf("jobguard: release %q: %w (the job frees itself at its hold-at-most)", s.job.Name, relErr)
	case n == 0:
		return fmt.Errorf("jobguard: release %q: %w: the row is no longer this run's (force-released by an operator?)", s.job.Name, sqllock.ErrLockLost)
	}
	return nil
}

// release runs the release statement, retrying transient errors within ctx.
func (g *Guard) release(ctx context.Context, job Job, token int64) (int64, error) {
	backoff := 5 * time.Millisecond
	for {
		var args []any
		if g.dialect == sqllock.MySQL {
			args = []any{job.AtLeast.Microseconds(), job.Name, token}
		} else {
			args = []any{job.Name, token, job.AtLeast.Microseconds()}
		}
		res, err := g.db.ExecContext(ctx, g.q.release, args...)
		if err == nil {
			return res.RowsAffected()
		}
		if !sqlutil.IsRetryable(err) || ctx.Err() != nil {
			return 0, err
		}
		select {
		case <-time.After(backoff):
			backoff = min(2*backoff, 200*time.Millisecond)
		case <-ctx.Done():
			return 0, errors.Join(err, ctx.Err())
		}
	}
}
