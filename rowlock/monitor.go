package rowlock

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/internal/telemetry"
)

// monitor notices held leases whose session died (killed, disconnected,
// server restarted) or whose transaction ended behind the lease's back.
//
// One goroutine per Locker runs one query per check interval for all its
// leases, whatever their number (store.alive). Pinging each lease's own
// transaction instead would cost a query per lease and would collide with
// the holder's statements on that connection. The goroutine runs only while
// a lease is held. Guarded by Locker.mu.
type monitor struct {
	leases map[*Lease]struct{}
	stop   context.CancelFunc // ends the running goroutine; nil when none runs
}

// watch adds s to the monitor and reports true, unless the Locker is
// closed.
func (l *Locker) watch(s *Lease) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	m := &l.mon
	if m.leases == nil {
		m.leases = make(map[*Lease]struct{})
	}
	m.leases[s] = struct{}{}
	if m.stop == nil {
		var ctx context.Context
		ctx, m.stop = context.WithCancel(context.Background())
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			l.run(ctx)
		}()
	}
	return true
}

// unwatch removes s from the monitor.
func (l *Locker) unwatch(s *Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := &l.mon
	delete(m.leases, s)
	if len(m.leases) == 0 && m.stop != nil {
		// Stop now rather than at the next tick, so that a process whose
		// last lease ended is left with no goroutine of ours.
		m.stop()
		m.stop = nil
	}
}

// stopAll stops the goroutine and returns the leases watched. Locker.mu
// held.
func (m *monitor) stopAll() []*Lease {
	if m.stop != nil {
		m.stop()
		m.stop = nil
	}
	held := make([]*Lease, 0, len(m.leases))
	for s := range m.leases {
		held = append(held, s)
	}
	m.leases = nil
	return held
}

// run checks the held leases once per interval until ctx ends; a check in
// flight ends with it.
func (l *Locker) run(ctx context.Context) {
	tick := time.NewTicker(l.cfg.check)
	defer tick.Stop()
	var failingSince time.Time // zero while checks succeed
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l.mu.Lock()
		held := make([]*Lease, 0, len(l.mon.leases))
		for s := range l.mon.leases {
			held = append(held, s)
		}
		l.mu.Unlock()
		if len(held) == 0 {
			continue
		}
		alive, err := l.check(ctx, held)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// A failed check (pool exhausted, network blip) proves nothing,
			// once. Checks failing for longer than unconfirmedLoss (a
			// partition: the leases' sessions may be gone, and the server
			// may have handed their rows on) end the leases: they can no
			// longer be vouched for.
			l.cfg.logger.Info("rowlock: session check failed", telemetry.LogError, err.Error())
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if since := time.Since(failingSince); since >= l.unconfirmedLoss() {
				for _, s := range held {
					s.lose(fmt.Sprintf("its session could not be checked for %v: %v", since.Round(time.Millisecond), err))
				}
				failingSince = time.Time{}
			}
			continue
		}
		failingSince = time.Time{}
		for i, s := range held {
			if !alive[i] {
				s.lose("its database session or transaction ended")
			}
		}
	}
}

// unconfirmedLoss is how long checks may fail in a row before the leases
// they could not confirm are ended.
func (l *Locker) unconfirmedLoss() time.Duration { return max(3*l.cfg.check, 3*time.Second) }

// check reports, for each of held, whether its hold is still there, in one
// query whatever their number. A session id alone does not say so: MariaDB
// numbers connections from 1 again after a restart and PostgreSQL reuses
// pids, so a dead lease's id may name another live session, often one of
// this pool's. The store matches the session id and its life (holder).
func (l *Locker) check(ctx context.Context, held []*Lease) ([]bool, error) {
	hs := make([]holder, len(held))
	for i, s := range held {
		hs[i] = s.holder
	}
	ctx, cancel := context.WithTimeout(ctx, max(l.cfg.check, time.Second))
	defer cancel()
	return l.st.alive(ctx, hs)
}
