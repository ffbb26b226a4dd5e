//go:build unix

package locktable

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A file gate is a named pipe (FIFO) per key in a folder beside the
// database file, which the holder keeps open for writing. A waiter opens
// it for reading and blocks in the poller until no writer is left: the
// holder closed it after its release committed, or died (the kernel
// closes a killed process's files, kill -9 included). A pipe rather than
// flock: a read waits in Go's poller, so a waiter that gives up stops at
// once, where a blocked flock cannot be called off.

// fileGateSupported: this platform has named pipes.
const fileGateSupported = true

// keepFIFO makes the FIFO at path if it is not there yet, and opens it for
// reading and writing (a writer alone would need a reader to open), not
// blocking and not inherited by children: a child that kept it open would
// keep the waiters blocked after this process let go.
func keepFIFO(path string) (int, error) {
	if err := unix.Mkfifo(path, 0o644); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	return unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
}

// dropFIFO lets go of a FIFO keepFIFO opened: its name first, so that the
// next holder makes a FIFO of its own, then the descriptor, which wakes
// the waiters.
func dropFIFO(path string, fd int) {
	_ = unix.Unlink(path)
	_ = unix.Close(fd)
}

// waitFIFO waits up to d for the FIFO at path to have no writer. It
// reports got when the writer it found let go; errNoGate when it found
// none (a holder too young to keep a gate, or one whose Locker keeps
// none), so that the caller polls; ctx.Err() when ctx ended first.
func waitFIFO(ctx context.Context, path string, d time.Duration) (bool, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, errNoGate
		}
		return false, errors.Join(errNoGate, err)
	}
	var b [1]byte
	// No writer: a read returns at once with nothing; one: EAGAIN.
	if n, err := unix.Read(fd, b[:]); err == nil && n == 0 {
		unix.Close(fd)
		return false, errNoGate
	} else if !errors.Is(err, unix.EAGAIN) {
		unix.Close(fd)
		return false, errors.Join(errNoGate, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Base(path)) // non-blocking: read in the poller
	defer f.Close()
	if err := f.SetReadDeadline(time.Now().Add(d)); err != nil {
		return false, errors.Join(errNoGate, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	for {
		_, err = f.Read(b[:])
		switch {
		case errors.Is(err, io.EOF):
			return true, nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			if err := ctx.Err(); err != nil {
				return false, err
			}
			return false, nil
		case err != nil:
			return false, err
		}
		// A byte nobody should write: read on.
	}
}
