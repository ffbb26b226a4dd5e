package sqllock

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxOwnerLen is the longest owner id, in bytes.
const MaxOwnerLen = 64

type ownerKey struct{}

// WithOwner returns a context whose acquisitions belong to owner. Without an
// owner every acquisition gets a fresh random one, so goroutines sharing a
// Locker exclude each other.
//
// Acquiring a key again with the same owner is reentrant in tablelock and
// advisory, and in rwlock for its holds: the key is held again at once (a
// hold count goes up, the token stays) and is free after as many releases.
// rowlock is not reentrant: its lock belongs to a transaction, and a second
// Acquire of a held key waits for the first lease, whatever owner the
// context names. Nor are a semaphore permit, an election campaign or a
// jobguard run: each call is a hold of its own. optimistic excludes no
// one, so there is nothing to enter again.
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

// ValidateOwner reports whether owner can be used as an owner id: 1 to
// MaxOwnerLen bytes of valid UTF-8 with no NUL byte, refused as a key would
// be, with an error matching ErrInvalidOption.
func ValidateOwner(owner string) error {
	switch {
	case owner == "" || len(owner) > MaxOwnerLen:
		return fmt.Errorf("%w: owner must be 1 to %d bytes, got %d", ErrInvalidOption, MaxOwnerLen, len(owner))
	case !utf8.ValidString(owner):
		return fmt.Errorf("%w: owner %q is not valid UTF-8", ErrInvalidOption, owner)
	case strings.IndexByte(owner, 0) >= 0:
		return fmt.Errorf("%w: owner %q contains a NUL byte", ErrInvalidOption, owner)
	}
	return nil
}
