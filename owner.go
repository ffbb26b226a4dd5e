package sqllock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
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
// owner share their locks. An owner is 1 to MaxOwnerLen bytes of valid
// UTF-8 with no NUL byte (acquisitions refuse others) and compares byte for
// byte: "worker-a" and "Worker-A" are two owners.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner set by WithOwner.
func OwnerFrom(ctx context.Context) (string, bool) {
	o, ok := ctx.Value(ownerKey{}).(string)
	return o, ok
}

// ResolveOwner returns the owner in ctx, validated, or a fresh random one
// (fresh reports which). Strategies call it once per acquisition. An owner
// is refused as a key would be, with an error matching ErrInvalidOption,
// unless it is 1 to MaxOwnerLen bytes of valid UTF-8 with no NUL byte.
func ResolveOwner(ctx context.Context) (owner string, fresh bool, err error) {
	if o, ok := OwnerFrom(ctx); ok {
		switch {
		case o == "" || len(o) > MaxOwnerLen:
			return "", false, fmt.Errorf("%w: owner must be 1 to %d bytes, got %d", ErrInvalidOption, MaxOwnerLen, len(o))
		case !utf8.ValidString(o):
			return "", false, fmt.Errorf("%w: owner %q is not valid UTF-8", ErrInvalidOption, o)
		case strings.IndexByte(o, 0) >= 0:
			return "", false, fmt.Errorf("%w: owner %q contains a NUL byte", ErrInvalidOption, o)
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
