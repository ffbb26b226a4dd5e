package rowlock

import "time"

// Alive runs one check of l's loss monitor over leases.
func Alive(l *Locker, leases ...*Lease) ([]bool, error) {
	return l.mon.check(leases, time.Second)
}

// EarlierLife returns a stand-in for s with s's session id but an earlier
// life: an earlier transaction on PostgreSQL, an earlier server start on
// MariaDB. A lease taken before a restart looks so once another session
// has its id.
func EarlierLife(s *Lease) *Lease {
	return &Lease{l: s.l, key: s.key, token: s.token, session: s.session, life: s.life - 1}
}

// Life returns what s recorded as its life: see Lease.life.
func Life(s *Lease) int64 { return s.life }
