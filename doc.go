// Package sqllock is a library of distributed locks that live in the SQL
// database an application already has: PostgreSQL, MySQL/MariaDB, or SQLite
// as the embedded default. No Redis, no ZooKeeper, no etcd.
//
// This package holds the contract every strategy implements: [Locker] hands
// out a [Lease] on a string key; the lease carries a fencing token
// ([Lease.Token]) that strictly increases for each new holder of a key, and
// closes [Lease.Done] when it is lost. [Do] runs a function under a lease and
// cancels the function's context the moment the lease is lost; the context
// carries the lease, so the writes can fence themselves with [TokenFrom].
// [AcquireAll] takes several keys in one fixed order, so holders of
// overlapping sets never deadlock (a [SetLocker], as rowlock is, takes
// them as one lease). [Hold] keeps a key for a long-running worker,
// re-acquiring it after a loss. [Dialect.MinVersion] states the oldest
// server versions supported.
//
// The strategies live in their own packages:
//
//   - tablelock: rows of a lock table with an expiry, renewed in the
//     background; works on every dialect and survives connection loss.
//   - rowlock: SELECT ... FOR UPDATE held in an open transaction.
//   - advisory: PostgreSQL advisory locks and MySQL/MariaDB GET_LOCK.
//   - optimistic: version-column compare-and-swap, and striped counters.
//
// Around them: fence (the resource-side check that refuses a stale
// holder's write, and the claim a new holder makes before it reads),
// jobguard (run a job once per period across replicas, on a schedule),
// reaper (deletes expired rows of the lock table), migrations (the
// schema, as goose migrations embedded in the module), and pgxq (a pgx
// transaction as the Querier that fence, rowlock.LockRows and optimistic
// take). docs/recipes.md has recipes: a nightly job in N replicas, a
// multi-item order, a long-running worker.
//
// Errors are matched with errors.Is against the sentinels below: the three
// outcomes a caller must tell apart are "held by someone else"
// ([ErrNotAcquired]), "my context ended" (the error also matches ctx.Err()),
// and "the database failed" (the driver's error, wrapped with the key). A
// deadline that passes during a dial or a statement is the second, even
// when the driver reports it first as an i/o timeout.
package sqllock
