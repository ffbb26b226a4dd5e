// Package rwlock is a read-write lock across processes: many readers or
// one writer per key, with writer preference, reentrant per owner, and a
// fencing token per grant, on PostgreSQL, MySQL/MariaDB and SQLite
// (Curator's InterProcessReadWriteLock, on the database).
//
//	rw, err := rwlock.New(db, dialect, 16, tablelock.WithTTL(30*time.Second))
//	defer rw.Close()
//	r, err := rw.RLock(ctx, "catalog") // up to 16 readers at once
//	defer r.Release(ctx)
//
// # How
//
// It is built on package tablelock, in the permit table of package
// semaphore (migration 00009; another table with tablelock.WithTable). A
// key has a writers' gate row and N reader rows (N given to New), each
// held like a tablelock key: an owner, an expiry on the database clock
// renewed by the holder, a token drawn by the statement that takes it.
//
//   - A reader takes the gate, takes a free reader row while it holds the
//     gate, and gives the gate back; when all N rows are held it waits.
//     Its token is its row's.
//   - A writer takes the gate and keeps it until Release, then asks in one
//     statement which of the key's reader rows are held (an index lookup
//     per row, locking nothing). While it holds the gate no reader gets a
//     row, so those are all the readers it must wait for: it waits for one
//     to go, as a tablelock waiter of its row, and asks again; when none
//     is held, it has the key.
//
// Writer preference follows: a writer waits only for the readers that
// passed the gate before it, and readers arriving later wait behind it,
// so a steady stream of readers cannot starve it. Writers queue for the
// gate as tablelock waiters do (NOTIFY on PostgreSQL, backoff elsewhere).
// An uncontended write costs three statements (take the gate, ask, give
// the gate back) against a raw lock row's two; a read four.
//
// Readers keep a row each rather than a count on the gate's row: a dead
// reader's share must come back after its TTL, and only a row of its own
// carries its expiry. Asking which rows are held costs the writer one
// statement either way, with no schema of its own.
//
// # Tokens
//
// A writer's token is the gate's, drawn when it took the gate: every
// earlier reader drew its row's token while it held the gate, and every
// earlier writer its gate's, before this writer could take the gate, from
// the one counter all tokens come from; so the writer's is larger than
// all of theirs. A reader's token, drawn after the last writer gave the
// gate back, is larger than every earlier writer's. Readers' tokens among
// themselves are unordered: they hold at once by design.
//
// # Reentrancy
//
// Calls whose contexts carry one owner (sqllock.WithOwner) share one hold:
// an owner reading again, or a writer reading or writing again, gets a
// Lease of its own at once, and the key is freed by its last Release. A
// reader asking to write is refused with sqllock.ErrInvalidOption (it
// would wait for itself). Without an owner every call is a hold of its
// own, and a blocking call that would wait for a hold its own goroutine
// took that way (a Lock after an RLock or a Lock of the key, an RLock
// after a Lock) is refused at once with sqllock.ErrInvalidOption, rather
// than waiting for itself until its context ends: read and write from
// different goroutines, or release first. (A hold handed to another
// goroutine to release still counts as its taker's.)
//
// # Loss
//
// A reader or writer whose process dies frees the key when its TTL passes
// (nothing holds a session); Close and Release free it at once. A Lease's
// Done and Err are those of its row: the gate's for a writer, the reader
// row's for a reader. sqllock.Extend pushes that row's expiry by hand
// ([Lease.Extend]); an Extend that finds the row no longer the hold's
// ends the hold as lost.
//
// The row-lock shared mode, without writer preference, is
// rowlock.Locker.AcquireShared; PostgreSQL's shared advisory locks are
// advisory.Locker.AcquireShared (MySQL has none: ErrUnsupported).
package rwlock
