package lease

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestLiveUntilEnd(t *testing.T) {
	var s state
	if err := s.Err(); err != nil {
		t.Fatalf("Err of a live state = %v, want nil", err)
	}
	done := s.Done()
	if isClosed(done) {
		t.Fatal("Done is closed before End")
	}
	if s.Done() != done {
		t.Fatal("Done returned a different channel")
	}
	want := errors.New("gone")
	s.End(want)
	if !isClosed(done) {
		t.Fatal("Done is not closed after End")
	}
	if err := s.Err(); err != want {
		t.Fatalf("Err after End = %v, want %v", err, want)
	}
	s.End(errors.New("later")) // must not close Done again
	if err := s.Err(); err != want {
		t.Fatalf("Err after a second End = %v, want the first %v", err, want)
	}
}

func TestDoneAfterEnd(t *testing.T) {
	var s state
	s.End(errors.New("gone"))
	if !isClosed(s.Done()) {
		t.Fatal("Done asked for after End is not closed")
	}
}

func TestConcurrentEnd(t *testing.T) {
	var s state
	done := s.Done()
	errs := make([]error, 32)
	var wg sync.WaitGroup
	for i := range errs {
		errs[i] = fmt.Errorf("end %d", i)
		wg.Go(func() {
			s.End(errs[i])
			<-s.Done()
		})
	}
	wg.Wait()
	<-done
	got := s.Err()
	found := false
	for _, err := range errs {
		found = found || err == got
	}
	if !found {
		t.Fatalf("Err = %v, want one of the errors passed to End", got)
	}
	for range 10 {
		if s.Err() != got {
			t.Fatal("Err changed after the first End")
		}
	}
}

func TestMarkReleasedOnce(t *testing.T) {
	var s state
	var first atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if s.MarkReleased() {
				first.Add(1)
			}
		})
	}
	wg.Wait()
	if n := first.Load(); n != 1 {
		t.Fatalf("MarkReleased reported first %d times, want 1", n)
	}
	if isClosed(s.Done()) || s.Err() != nil {
		t.Fatal("MarkReleased ended the lease")
	}
}

func TestLose(t *testing.T) {
	lost := errors.New("lost")

	var s state
	if !s.Lose(lost) {
		t.Fatal("Lose of a live state reported false")
	}
	if !isClosed(s.Done()) || s.Err() != lost {
		t.Fatalf("after Lose: Done closed %v, Err %v", isClosed(s.Done()), s.Err())
	}
	if s.Lose(errors.New("again")) {
		t.Fatal("a second Lose reported true")
	}
	if !s.MarkReleased() {
		t.Fatal("MarkReleased after a loss reported false")
	}

	var r state
	r.MarkReleased()
	if r.Lose(lost) {
		t.Fatal("Lose after MarkReleased reported true")
	}
	if isClosed(r.Done()) || r.Err() != nil {
		t.Fatal("Lose after MarkReleased ended the lease")
	}

	var e state
	e.End(errors.New("released"))
	if e.Lose(lost) || e.Err() == lost {
		t.Fatal("Lose after End took effect")
	}
}
