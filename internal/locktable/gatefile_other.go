//go:build !unix

package locktable

import (
	"context"
	"time"
)

// fileGateSupported: no named pipes here (Windows); SQLite's waiters in
// other processes poll, within the wait bound.
const fileGateSupported = false

func keepFIFO(string) (int, error) { return -1, errNoGate }

func dropFIFO(string, int) {}

func waitFIFO(context.Context, string, time.Duration) (bool, error) { return false, errNoGate }
