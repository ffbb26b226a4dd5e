package rowlock

import "context"

// Alive runs one check of l's loss monitor over leases.
func Alive(l *Locker, leases ...*Lease) ([]bool, error) {
	return l.check(context.Background(), leases)
}

// EarlierLife returns a stand-in for s with s's session id but an earlier
// life: an earlier transaction on PostgreSQL, an earlier server start on
// MariaDB. A lease taken before a restart looks so once another session
// has its id.
func EarlierLife(s *Lease) *Lease {
	e := &Lease{l: s.l, a: s.a, holder: holder{session: s.holder.session, life: s.holder.life - 1}}
	e.base.Init("rowlock", s.Key(), s.Token())
	return e
}

// Life returns what s recorded as its life: see holder.
func Life(s *Lease) int64 { return s.holder.life }
