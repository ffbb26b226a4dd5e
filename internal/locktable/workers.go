package locktable

import (
	"sync"
	"time"
)

// workerIdle is how long a worker goroutine stays parked without work
// before it exits.
const workerIdle = 5 * time.Second

// workers runs a Table's background statements (detached takes, leaving a
// queue) on goroutines that stay parked between them.
// A goroutine per take grew its stack under the driver on every take (6–9 %
// of the client's CPU samples with 8 busy Lockers); a parked worker keeps
// its grown stack until a garbage collection shrinks it.
type workers struct {
	jobs     chan func() // unbuffered: a job goes to a parked worker or to a new one
	quit     chan struct{}
	quitOnce sync.Once
}

func newWorkers() *workers {
	return &workers{jobs: make(chan func()), quit: make(chan struct{})}
}

// run runs f on a parked worker, or on a new one when none is parked. It
// never waits for f.
func (w *workers) run(f func()) {
	select {
	case w.jobs <- f:
	default:
		go w.work(f)
	}
}

func (w *workers) work(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.jobs:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// stop lets the parked workers go; a job already given to one runs to its
// end. It is idempotent.
func (w *workers) stop() { w.quitOnce.Do(func() { close(w.quit) }) }
