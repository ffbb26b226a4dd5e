package sqllock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"
)

// MaxOwnerLen is the longest owner id, in bytes.
const MaxOwnerLen = 64

type ownerKey struct{}

// WithOwner returns a context whose acquisitions belong to owner. Acquiring a
// key again with the same owner is reentrant (a hold count goes up and needs
// as many releases). Without an owner every acquisition gets a fresh random
// one, so goroutines sharing a Locker exclude each other.
//
// Owners must be unique across processes: two processes that pass the same
// owner share their locks.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner set by WithOwner.
func OwnerFrom(ctx context.Context) (string, bool) {
	o, ok := ctx.Value(ownerKey{}).(string)
	return o, ok
}

// ResolveOwner returns the owner in ctx, validated, or a fresh random one
// (fresh reports which). Strategies call it once per acquisition.
func ResolveOwner(ctx context.Context) (owner string, fresh bool, err error) {
	if o, ok := OwnerFrom(ctx); ok {
		if o == "" || len(o) > MaxOwnerLen {
			return "", false, fmt.Errorf("%w: owner must be 1 to %d bytes, got %d", ErrInvalidOption, MaxOwnerLen, len(o))
		}
		return o, false, nil
	}
	return NewOwnerID(), true, nil
}

// NewOwnerID returns a random 128-bit owner id in hex.
func NewOwnerID() string {
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
