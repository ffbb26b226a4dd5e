package advisory

// WaitBackends returns the server's ids of l's pinned wait sessions.
func WaitBackends(l *Locker) []int64 {
	var ids []int64
	for _, s := range l.waiters {
		if id := s.backend.Load(); id != 0 {
			ids = append(ids, id)
		}
	}
	return ids
}
