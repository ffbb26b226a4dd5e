package locktable

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// goid is the calling goroutine's id, read from its stack header.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return string(bytes.Fields(b)[1])
}

// A job runs on the worker the previous one left parked; a job given
// while every worker is busy runs at once on a new one; stop lets the
// parked workers go.
func TestWorkers(t *testing.T) {
	w := newWorkers()
	ran := make(chan string)
	w.run(func() { ran <- goid() })
	first := <-ran
	// The worker parks after sending; give it the time to get there.
	var again string
	for range 100 {
		w.run(func() { ran <- goid() })
		if again = <-ran; again == first {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if again != first {
		t.Errorf("jobs ran on goroutines %s and %s: the parked worker was not reused", first, again)
	}

	release := make(chan struct{})
	w.run(func() { ran <- goid(); <-release })
	busy := <-ran
	w.run(func() { ran <- goid() })
	select {
	case other := <-ran:
		if other == busy {
			t.Errorf("a job ran on the busy worker %s", busy)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a job given while the only worker was busy did not run")
	}
	close(release)

	before := runtime.NumGoroutine()
	w.stop()
	w.stop() // idempotent
	deadline := time.Now().Add(workerIdle / 2)
	for runtime.NumGoroutine() >= before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n >= before {
		t.Errorf("%d goroutines after stop, %d before: the parked workers did not exit", n, before)
	}
}
