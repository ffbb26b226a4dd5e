package jobguard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/lease"
)

var _ sqllock.Lease = (*Lease)(nil)

// Lease is one run's hold on a job. It is never renewed: it ends at
// AtMost, and counts itself lost AtMost/10 before that, so its holder learns
// of the loss before another replica could take the job.
type Lease struct {
	base     lease.Base
	g        *Guard
	job      Job
	owner    string
	deadline time.Time
	timer    *time.Timer
}

// newLease records a won take. start is when the statement was sent: the
// database set the expiry from a clock reading no earlier than that.
func (g *Guard) newLease(job Job, owner string, token int64, start time.Time) *Lease {
	s := &Lease{g: g, job: job, owner: owner}
	s.base.Init("jobguard", job.Name, token)
	s.deadline = start.Add(job.AtMost - job.AtMost/10)
	s.timer = time.AfterFunc(time.Until(s.deadline), s.expire)
	return s
}

func (s *Lease) expire() {
	s.base.Lose(s.base.Lost(fmt.Sprintf("ran past its hold-at-most %v", s.job.AtMost)))
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
	if time.Now().After(s.deadline) {
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

// free is Release's own work: give the row back, kept until AtLeast.
func (s *Lease) free(ctx context.Context, lost error) error {
	s.timer.Stop()
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
