//go:build linux

package sessionwatch

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Watch is one watched socket.
type Watch struct {
	id   uint64
	rc   syscall.RawConn
	fn   func()
	epfd int // the poller's epoll instance, open while the watch is registered

	mu      sync.Mutex
	stopped bool
	fired   bool
}

// looks counts the events the watcher handled, for tests.
var looks atomic.Int64

// poller is the process's epoll instance and the watches registered on
// it. It exists, with its goroutine, only while a watch does: a process
// that holds no session lease runs nothing of ours.
var poller struct {
	mu      sync.Mutex
	f       *os.File // the epoll instance; nil when no watch exists
	epfd    int      // f's descriptor (f.Fd would make it blocking)
	next    uint64
	watches map[uint64]*Watch
}

func watchNet(nc net.Conn, fn func()) *Watch {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &poller
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil {
		if err := start(); err != nil {
			return nil
		}
	}
	p.next++
	w := &Watch{id: p.next, rc: rc, fn: fn, epfd: p.epfd}
	ev := w.event(idleEvents)
	epfd := p.epfd
	cerr := rc.Control(func(fd uintptr) {
		err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if cerr != nil || err != nil {
		if len(p.watches) == 0 {
			stopPoller()
		}
		return nil
	}
	p.watches[w.id] = w
	return w
}

// start creates the epoll instance and its goroutine. poller.mu held.
func start() error {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return err
	}
	// Non-blocking: os.NewFile registers it with the runtime's poller, so
	// waiting on it parks a goroutine, not a thread.
	f := os.NewFile(uintptr(fd), "sqllock-sessionwatch")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return err
	}
	poller.f, poller.epfd = f, fd
	poller.watches = make(map[uint64]*Watch)
	go loop(rc)
	return nil
}

// stopPoller closes the epoll instance, which ends its goroutine.
// poller.mu held.
func stopPoller() {
	_ = poller.f.Close()
	poller.f, poller.watches = nil, nil
}

// loop reports the closed sockets until the epoll instance is closed.
func loop(rc syscall.RawConn) {
	var evs [32]unix.EpollEvent
	for {
		var n int
		err := rc.Read(func(fd uintptr) bool {
			var err error
			n, err = unix.EpollWait(int(fd), evs[:], 0)
			return err == nil && n > 0 || err != nil && err != unix.EINTR
		})
		if err != nil {
			return // closed: no watch is left
		}
		for i := range n {
			id := uint64(uint32(evs[i].Fd)) | uint64(uint32(evs[i].Pad))<<32
			poller.mu.Lock()
			w := poller.watches[id]
			poller.mu.Unlock()
			if w == nil {
				continue
			}
			looks.Add(1)
			if evs[i].Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0 && !w.fatalPending() {
				continue // an answer to a statement
			}
			w.mu.Lock()
			fire := !w.stopped && !w.fired
			w.fired = true
			w.mu.Unlock()
			if fire {
				w.fn()
			}
		}
	}
}

func (w *Watch) stop() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.mu.Unlock()
	p := &poller
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watches[w.id] != w {
		return
	}
	delete(p.watches, w.id)
	epfd := p.epfd
	// A socket closed already has left the epoll set by itself.
	_ = w.rc.Control(func(fd uintptr) {
		_ = unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	})
	if len(p.watches) == 0 {
		stopPoller()
	}
}

// The events watched. Edge-triggered: one event per arrival of data,
// however long the data waits to be read by the statement it answers.
// While the owner runs a statement (Busy), data is its answer, read by the
// driver, which also reads a FATAL error that cuts it off: only the close
// is watched, and the socket's owner is not woken by every answer.
const (
	idleEvents = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET
	busyEvents = unix.EPOLLRDHUP | unix.EPOLLET
)

func (w *Watch) event(events uint32) unix.EpollEvent {
	ev := unix.EpollEvent{Events: events}
	ev.Fd, ev.Pad = int32(uint32(w.id)), int32(uint32(w.id>>32)) // the user data
	return ev
}

// modify changes the events watched. w.mu held through the call: stop
// waits for it, so the epoll instance is still open.
func (w *Watch) modify(events uint32) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.fired {
		return
	}
	ev := w.event(events)
	// Back to idle with data already waiting (a FATAL error that came
	// after the statement's answer) reports it at once: a modification
	// rechecks readiness.
	_ = w.rc.Control(func(fd uintptr) {
		_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, int(fd), &ev)
	})
}

func (w *Watch) busy() { w.modify(busyEvents) }
func (w *Watch) idle() { w.modify(idleEvents) }

// fatalPending peeks, without consuming anything, at the data waiting on
// the socket: true when it starts with the server's FATAL error, which
// PostgreSQL sends a session it terminates before it releases the
// session's locks and closes the socket.
func (w *Watch) fatalPending() bool {
	var buf [128]byte
	n := 0
	_ = w.rc.Control(func(fd uintptr) {
		n, _, _ = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	})
	return n > 0 && fatal(buf[:n])
}
