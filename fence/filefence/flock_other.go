//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filefence

import (
	"fmt"
	"os"
	"runtime"

	"github.com/sqllock/sqllock"
)

func supported() error {
	return fmt.Errorf("%w: no flock on %s", sqllock.ErrUnsupported, runtime.GOOS)
}

func tryLock(*os.File, bool) (bool, error) { return false, supported() }
