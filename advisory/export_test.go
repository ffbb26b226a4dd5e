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

// SetBeforeWait makes f run between arming a wait's guard and sending its
// statement, until the test ends.
func SetBeforeWait(t interface{ Cleanup(func()) }, f func()) {
	beforeWait = f
	t.Cleanup(func() { beforeWait = nil })
}

// SetInterruptLost makes the interrupts of waits in the server go unsent,
// as interrupts that missed their statement, until the test ends.
func SetInterruptLost(t interface{ Cleanup(func()) }) {
	interruptLost = func() bool { return true }
	t.Cleanup(func() { interruptLost = nil })
}

// Armed reports, for the session that holds key's lock in l (or, with no
// lease on key, the shared session key maps to), whether it is pinned
// with a socket watch and whether that watch looks at what arrives while
// the session is idle.
func Armed(l *Locker, key string) (watched, armed bool) {
	l.mu.Lock()
	s := l.sessions[l.lockID(key).slot]
	if e := l.keys[key]; e != nil && e.state == stHeld {
		s = e.sess
	}
	l.mu.Unlock()
	s.sem <- struct{}{}
	defer s.unlock()
	return s.watch != nil, s.armed
}
