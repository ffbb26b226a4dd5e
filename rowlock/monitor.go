package rowlock

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
)

// monitor notices held leases whose session died (killed, disconnected,
// server restarted) or whose transaction ended behind the lease's back.
//
// One goroutine per Locker runs one query per check interval for all its
// leases, whatever their number (see check). Pinging each lease's own
// transaction instead would cost a query per lease and would collide with
// the holder's statements on that connection. The goroutine runs only while
// a lease is held.
type monitor struct {
	l      *Locker
	mu     sync.Mutex
	leases map[*Lease]struct{}
	stop   chan struct{} // of the running goroutine; nil when none runs
}

func (m *monitor) add(s *Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leases == nil {
		m.leases = make(map[*Lease]struct{})
	}
	m.leases[s] = struct{}{}
	if m.stop == nil {
		m.stop = make(chan struct{})
		go m.run(m.stop)
	}
}

func (m *monitor) remove(s *Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.leases, s)
	if len(m.leases) == 0 && m.stop != nil {
		// Stop now rather than at the next tick, so that a process whose
		// last lease ended is left with no goroutine of ours.
		close(m.stop)
		m.stop = nil
	}
}

func (m *monitor) run(stop chan struct{}) {
	interval := m.l.cfg.check
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		m.mu.Lock()
		if m.stop != stop {
			// Stopped while the tick fired; a newer goroutine may run.
			m.mu.Unlock()
			return
		}
		held := make([]*Lease, 0, len(m.leases))
		for s := range m.leases {
			held = append(held, s)
		}
		m.mu.Unlock()
		alive, err := m.check(held, interval)
		if err != nil {
			// A failed check (pool exhausted, network blip) proves nothing.
			m.l.cfg.logger.Info("rowlock: session check failed", "error", err.Error())
			continue
		}
		for i, s := range held {
			if !alive[i] {
				s.lose("its database session or transaction ended")
			}
		}
	}
}

// check reports, for each of held, whether its hold is still there, in one
// query whatever their number.
//
// A session id alone does not say so: MariaDB numbers connections from 1
// again after a restart and PostgreSQL reuses pids, so a dead lease's id
// may name another live session, often one of this pool's. A lease is
// alive only while its session id and its life (Lease.life) both match:
//
//   - PostgreSQL: pid and transaction id (backend_xid). An xid names one
//     transaction and xids keep counting across restarts: exact. Not
//     xact_start, which is NULL under track_activities = off.
//   - MariaDB: connection id, not reused within one server life, and the
//     server's start (UNIX_TIMESTAMP() - Uptime, exact as both read the
//     statement's start) no later than the one the lease's connection read
//     the same way when it was first used. A restarted server started
//     later, barring two starts within one second or a clock set back. Not
//     UUID_SHORT()'s start field, which drifts later once its counter
//     carries (after 2^24 calls; a lease's drifted life would stay alive
//     past a restart only after more than 2^24 calls a second on average
//     since the start, but exact costs no more: one read per connection).
//     Not INNODB_TRX: it needs the PROCESS privilege
//     and is a cache refreshed only once left unread for 0.1s, so it can
//     hide a fresh lease or keep showing a dead one.
func (m *monitor) check(held []*Lease, timeout time.Duration) ([]bool, error) {
	ids := make([]string, len(held))
	for i, s := range held {
		ids[i] = strconv.FormatInt(s.session, 10)
	}
	args := []any{strings.Join(ids, ",")}
	if m.l.dialect == sqllock.Postgres {
		xids := make([]string, len(held))
		for i, s := range held {
			xids[i] = strconv.FormatInt(s.life, 10)
		}
		args = append(args, strings.Join(xids, ","))
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Second))
	defer cancel()
	rows, err := m.l.db.QueryContext(ctx, m.l.q.alive, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	alive := make([]bool, len(held))
	if m.l.dialect == sqllock.Postgres {
		for rows.Next() {
			var i int
			if err := rows.Scan(&i); err != nil {
				return nil, err
			}
			if i >= 1 && i <= len(held) {
				alive[i-1] = true // WITH ORDINALITY counts from 1
			}
		}
		return alive, rows.Err()
	}
	started := make(map[int64]int64, len(held)) // session id: server start
	for rows.Next() {
		var id, start int64
		if err := rows.Scan(&id, &start); err != nil {
			return nil, err
		}
		started[id] = start
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, s := range held {
		start, ok := started[s.session]
		alive[i] = ok && s.life >= start
	}
	return alive, nil
}
