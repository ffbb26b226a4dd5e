//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filefence

import (
	"errors"
	"os"
	"syscall"
)

func supported() error { return nil }

// tryLock takes flock(2) on f without waiting; false when another open
// file holds it. flock locks belong to the open file, so two Files of one
// process exclude each other as two processes do.
func tryLock(f *os.File, exclusive bool) (bool, error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, err
	}
}
