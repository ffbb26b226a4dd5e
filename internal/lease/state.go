package lease

import "sync"

// closed is the Done channel of a state ended before anyone asked for it.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// state is the end-once state of one lease: the Done channel, closed once,
// the error saying why the lease ended, and whether Release was called.
// The zero value is a live lease, ready to use. A state must not be copied
// after first use: keep it as a field of the Base it belongs to.
type state struct {
	mu       sync.Mutex
	done     chan struct{} // made on first use
	ended    bool          // done is closed
	released bool          // MarkReleased was called
	err      error         // why the lease ended
}

// Done is closed when the lease ends (End or Lose).
func (s *state) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		if s.ended {
			return closed
		}
		s.done = make(chan struct{})
	}
	return s.done
}

// Err is nil while the lease lives, and afterwards the error it ended with.
func (s *state) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// End ends the lease with err, closing Done. Only the first End or Lose
// counts; later calls do nothing.
func (s *state) End(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.end(err)
}

// Lose ends the lease with err unless it has ended or MarkReleased has been
// called, and reports whether it did. Either the loss is seen by a Release
// that calls MarkReleased and then Err, or the Release by the loss.
func (s *state) Lose(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released || s.ended {
		return false
	}
	s.end(err)
	return true
}

// end does End's work. s.mu held.
func (s *state) end(err error) {
	if s.ended {
		return
	}
	s.ended = true
	s.err = err
	if s.done != nil {
		close(s.done)
	}
}

// MarkReleased records a call of Release and reports whether it was the
// first: a later Release must return an error matching sqllock.ErrReleased.
// It does not end the lease; Release calls End when it is done.
func (s *state) MarkReleased() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return false
	}
	s.released = true
	return true
}
