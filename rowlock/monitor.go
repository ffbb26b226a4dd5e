package rowlock

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// monitor notices held leases whose session died (killed, disconnected,
// server restarted) or whose transaction ended behind the lease's back.
//
// One goroutine per Locker runs one query per check interval for all its
// leases, whatever their number: the session ids recorded at acquisition,
// looked up in pg_stat_activity (with an open transaction) or in
// information_schema.PROCESSLIST. Pinging each lease's own transaction
// instead would cost a query per lease and would collide with the holder's
// statements on that connection. The goroutine exits when no lease is held.
type monitor struct {
	l       *Locker
	mu      sync.Mutex
	leases  map[*Lease]struct{}
	running bool
}

func (m *monitor) add(s *Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leases == nil {
		m.leases = make(map[*Lease]struct{})
	}
	m.leases[s] = struct{}{}
	if !m.running {
		m.running = true
		go m.run()
	}
}

func (m *monitor) remove(s *Lease) {
	m.mu.Lock()
	delete(m.leases, s)
	m.mu.Unlock()
}

func (m *monitor) run() {
	interval := m.l.cfg.check
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for range tick.C {
		m.mu.Lock()
		if len(m.leases) == 0 {
			m.running = false
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
		for _, s := range held {
			if !alive[s.session] {
				s.lose("its database session or transaction ended")
			}
		}
	}
}

// check returns the session ids among held's that are still alive.
func (m *monitor) check(held []*Lease, timeout time.Duration) (map[int64]bool, error) {
	ids := make([]string, len(held))
	for i, s := range held {
		ids[i] = strconv.FormatInt(s.session, 10)
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Second))
	defer cancel()
	rows, err := m.l.db.QueryContext(ctx, m.l.q.alive, strings.Join(ids, ","))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	alive := make(map[int64]bool, len(held))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		alive[id] = true
	}
	return alive, rows.Err()
}
