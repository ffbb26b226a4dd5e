// Package semaphore limits how many holders a key has at once, across
// processes: N permits per key, each a lease with its own fencing token, on
// PostgreSQL, MySQL/MariaDB and SQLite (Curator's InterProcessSemaphoreV2,
// Redisson's RPermitExpirableSemaphore, on the database).
//
//	sem, err := semaphore.New(db, dialect, tablelock.WithTTL(30*time.Second))
//	defer sem.Close()
//	p, err := sem.Acquire(ctx, "exports/s3", 3) // at most 3 uploads at once
//	defer p.Release(ctx)
//
// # How
//
// A key's N permits are N rows of the permit table (sqllock_semaphores,
// migration 00009), "key#0" to "key#N-1", each held the way package
// tablelock holds a key: an owner, an expiry on the database clock renewed
// by the holder, a token drawn by the statement that takes it. So a
// [Permit] is a lease like any other: [Permit.Done] closes when it is lost,
// it works with [sqllock.Do]-style code through its Err and Done, and
// [Permit.Extend] extends it. A holder that dies gives its permit back
// when its TTL passes (nothing holds a session); Close or Release give it
// back at once.
//
// [Semaphore.Acquire] first tries the slots once, from a random one. When
// all are held it waits as the dialect allows. On PostgreSQL it waits on
// every slot at once through tablelock's waiting, woken by the NOTIFY of
// a release anywhere (and, in-process, directly). On MariaDB and SQLite,
// where releases elsewhere cannot be heard, it makes one pass over the
// slots at a time between backoff sleeps (1ms to 100ms, with jitter), cut
// short by a release through the same [Semaphore]: one poller per waiting
// caller, not one per slot, since SQLite has one write lock for them all.
// A permit is never reentrant: every call gets its own, whatever owner its
// context carries.
//
// # Changing N
//
// N is an argument of each Acquire, not a property stored with the key: an
// Acquire with N takes one of the slots 0 to N-1. So:
//
//   - Raising N lets the new slots be taken at once.
//   - Lowering N never revokes a permit: a holder of a slot at or above the
//     new N keeps it until it releases or loses it, and Acquires with the
//     new N wait for one of the first N slots. The count of holders drains
//     to the new N as the old holders finish; meanwhile it is at most the
//     old N.
//   - Callers that disagree on N for one key share the slots they have in
//     common: at most the largest N hold at once. Give every caller of a
//     key the same N (a constant, or configuration read at start).
//
// # Fencing
//
// [Permit.Token] fences the writes of one permit slot: each new holder of
// a slot gets a larger token. Tokens of different slots are unrelated
// (several permits are held at once by design), so fence a resource that
// only one permit holder may write per slot ([Permit.Slot]) or not at all.
package semaphore
