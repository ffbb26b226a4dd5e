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
