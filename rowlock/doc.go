// Package rowlock is the pessimistic strategy: a lease is a row lock
// (SELECT ... FOR UPDATE) held by an open transaction on PostgreSQL or
// MariaDB. The database holds the lock for as long as the transaction stays
// open and drops it by itself when the holder's session dies, so there is
// no expiry to tune and no renewal to miss.
//
// [New] returns a [Locker]. [Locker.Acquire] waits in the database's own
// lock queue, bounded by its context: a cancelled wait is stopped on the
// server too (pgx sends a cancel request; on MariaDB the Locker kills the
// waiting session, whose statement the driver alone would leave queued),
// and its connection is discarded.
// [Locker.TryAcquire] uses NOWAIT. The [Lease] exposes its transaction
// ([Lease.Tx], or [TxFrom] inside [sqllock.Do]): work done there commits
// with [Lease.Release] in the same step that frees the key, or is undone
// with [Lease.Rollback]; [sqllock.Do] rolls back when its function fails.
// A rowlock whose writes run in its own transaction is safe by
// construction: a holder whose session is killed loses its writes
// together with its lock.
//
// [sqllock.AcquireAll], TryAcquireAll and DoAll take several keys in one
// transaction ([Locker.AcquireSet]): one connection, one [Lease] behind
// every key, and [TxFrom] works inside DoAll, so an order of several items
// commits or rolls back as one.
//
// The fencing token is drawn from the shared sequence by the statement
// that takes the row lock, after the lock is granted, so it is strictly
// larger for each new holder of a key.
//
// [LockRows] locks rows of an application table (stock items, accounts) in
// one statement in sorted key order, so transactions that lock overlapping
// sets queue instead of deadlocking: the multi-item order in one
// transaction, with no lock table at all. It takes any [sqllock.Querier]
// inside a transaction: a *sql.Tx, a *sqlx.Tx, a lease's own [Lease.Tx],
// or a pgx.Tx through package pgxq. Writes in that transaction need no
// fence; [Token] draws one for work done elsewhere under the locks.
//
// # Shared mode
//
// [Locker.AcquireShared] and [Locker.TryAcquireShared] hold the key's row
// with SELECT ... FOR SHARE on PostgreSQL and LOCK IN SHARE MODE on
// MariaDB: shared holders overlap, and Acquire (FOR UPDATE) excludes them
// all. Each shared lease draws its own token once its lock is granted, and
// a writer draws its own only once every earlier reader has ended, so a
// writer's token is larger than every reader's before it. The server
// queues a writer behind the readers it found, but readers arriving while
// it waits may still join them: under a steady stream of overlapping
// readers a writer can wait long. Package rwlock prefers writers. On the
// MySQL path (MySQL 8), TryAcquireShared is refused with
// [sqllock.ErrUnsupported]: the two servers share no NOWAIT syntax for a
// shared read. SQLite has no row locks at all (see New).
//
// # Cost and the pool-size rule
//
// Each held lease pins one pooled connection and one open transaction until
// it is released. A process that holds up to N leases at once needs
// db.SetMaxOpenConns of at least N+1 (the extra connection serves the loss
// monitor and the MariaDB kill of a cancelled wait), and the server's
// max_connections must cover every process. An Acquire that finds the pool
// exhausted waits for a connection within its context and then says so; it
// never deadlocks inside the library. Long-held leases also hold back
// PostgreSQL's vacuum horizon and MariaDB's purge, as any long transaction
// does.
//
// Prefer rowlock for short critical sections whose work lives in the same
// database: the lock and the work commit or vanish together, and a dead
// holder frees the key at once (the database ends its session). Prefer
// tablelock for long holds, for many keys per process (it pins no
// connection), behind transaction-pooling proxies, and on SQLite, which
// rowlock does not serve ([New] returns an error matching
// sqllock.ErrUnsupported).
//
// # Loss
//
// One goroutine per Locker checks, once per [WithCheckInterval] (1s by
// default), all its held leases in one query. A session id alone would not
// do, since ids are reused (MariaDB starts again from 1 after a restart):
// on PostgreSQL each lease's pid and transaction id are looked up in
// pg_stat_activity, on MariaDB its connection id in
// information_schema.PROCESSLIST together with the server's start time,
// which a restart changes. A lease whose session (or, on PostgreSQL,
// transaction) is gone closes [Lease.Done] and reports sqllock.ErrLockLost
// within about one interval, at a cost of one query per interval per Locker
// whatever the number of leases. On PostgreSQL through
// github.com/jackc/pgx/v5/stdlib on Linux, a session the server ends (a
// kill, a timeout, a crash) is noticed at once instead, without a query:
// the lease's socket is watched, never read, for the FATAL error the
// server sends before it frees the session's locks (TestSessionKillNotice).
// The promise that protects the resource is
// the fence (and the transaction itself), not the notice: another holder
// may already have the key when Done closes.
//
// Not reentrant: a second Acquire of a held key waits for the first lease,
// whatever owner the context names.
//
// # Close
//
// A [Locker] is an [io.Closer], and [Locker.Close] means what it means in
// every strategy of this module:
//
//   - Acquisitions after Close are refused with an error matching
//     [sqllock.ErrClosed] that names the key. An Acquire in flight at that
//     moment is stopped (a wait in the server's lock queue is cancelled
//     there, as for a cancelled context, and a lock granted meanwhile is
//     given back) and returns an error matching both [sqllock.ErrClosed]
//     and [sqllock.ErrNotAcquired].
//   - Every key the Locker holds is freed: the transactions of its leases
//     are rolled back, so their work is undone, and those leases end as
//     lost: Done is closed and Err matches [sqllock.ErrLockLost] with the
//     cause "the Locker was closed". Their first Release or Rollback returns
//     that loss, later ones [sqllock.ErrReleased]. Lost, not released: the
//     holder's work was cut short, and [sqllock.Do] cancels it. The loss is
//     reported before the rollback, which waits for a statement the holder
//     still runs in the transaction.
//   - Close returns once the keys are free on the server: the sessions of
//     stopped waits, whose connections are discarded, are gone (it waits
//     for them up to 5s).
//   - The loss monitor stops before Close returns, and the Locker's
//     prepared statements are closed.
//   - The *sql.DB is the caller's: Close never closes it.
//
// Close is idempotent: later calls return nil.
package rowlock
