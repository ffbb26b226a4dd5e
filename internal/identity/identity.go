// Package identity is the holder identity the strategies record: the owner in
// the caller's context (sqllock.WithOwner) or a fresh random one, and this
// process's "hostname/pid".
package identity

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"sync"

	"github.com/sqllock/sqllock"
)

// Resolve returns the owner in ctx, validated (sqllock.ValidateOwner), or
// a fresh random one (fresh reports which). Strategies call it once per
// acquisition.
func Resolve(ctx context.Context) (owner string, fresh bool, err error) {
	if o, ok := sqllock.OwnerFrom(ctx); ok {
		if err := sqllock.ValidateOwner(o); err != nil {
			return "", false, err
		}
		return o, false, nil
	}
	return NewOwner(), true, nil
}

// NewOwner returns a random 128-bit owner id in hex.
func NewOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

var hostOnce = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "unknown"
	}
	if len(h) > 200 {
		h = h[:200]
	}
	return h + "/" + strconv.Itoa(os.Getpid())
})

// Host returns "hostname/pid" for this process, recorded beside the owner so
// an operator can tell who holds a lock.
func Host() string { return hostOnce() }
