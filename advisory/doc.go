// Package advisory implements [sqllock.Locker] with the database's own
// in-memory locks: PostgreSQL advisory locks (pg_try_advisory_lock) and
// MySQL/MariaDB named locks (GET_LOCK). They need no table and no renewal:
// the server keeps them per session and drops them when the session ends.
// SQLite has none; [New] returns an error matching [sqllock.ErrUnsupported]
// there (use tablelock).
//
//	l, err := advisory.New(db, dialect) // PostgreSQL or MySQL
//	defer l.Close()
//	lease, err := l.Acquire(ctx, "jobs/nightly")
//	defer lease.Release(ctx)
//
// # Sessions: many locks, few connections
//
// A session lock belongs to the connection that took it, so a [Locker] pins
// connections (*sql.Conn) and releases every lock on the session that took
// it. It pins at most [WithSessions] of them (default 2) and puts every key
// on one of them, chosen by the key's hash: 1,000 held keys cost two
// connections, not 1,000. Statements on one session run one at a time, so
// each is kept short: only the try forms are used (pg_try_advisory_lock,
// GET_LOCK(name, 0)), never a wait inside the server; waits have sessions
// of their own (below). A session that holds
// nothing goes back to the pool after one check interval; one pinned only
// for attempts that failed goes back at once.
//
// The server cannot tell two owners on one session apart (PostgreSQL
// advisory locks stack per session, GET_LOCK is reentrant), so the Locker
// tracks holders itself: the same owner ([sqllock.WithOwner]) re-acquires
// reentrantly without a round trip; another owner of the same Locker is
// refused, or waits, without asking the server.
//
// # Waiting
//
// A blocked [Locker.Acquire] waits in the server: on a wait session of its
// own it asks for the lock (pg_advisory_lock, GET_LOCK with a one-second
// timeout it renews), and the server grants it the moment the holder lets
// go, in the order the waits were queued, the fencing token drawn in the
// same statement. The handoff to a waiter in another process is one round
// trip, as for raw pg_advisory_lock, and a waiting Acquire sends no
// statement (on MySQL and MariaDB, one a second).
// The lease then lives on the wait session until its release: a session
// lock cannot move to the key's shared session. A key refused within the
// last second goes to a wait session at once, skipping the try.
//
// A Locker has at most [WithWaitSessions] wait sessions (default 4), each
// serving one key at a time, taken from the pool and returned one check
// interval after their last use. Other callers of the Locker waiting for
// the same key wait in the process, not the server. Waits beyond the limit,
// and all waits when the pool's SetMaxOpenConns leaves no room, poll with
// exponential backoff and jitter capped by [WithMaxBackoff] (default 50ms);
// a release in this process, by any Locker, wakes the first of them at
// once. A wait that ends (its context, [Locker.Close]) is interrupted on the
// server from another connection (pg_cancel_backend, KILL QUERY) and its
// session closed, so a grant that raced the interruption is freed and
// nothing stays queued. Closing a wait session ends only that wait: it
// serves one key at a time and is given back only once that key's lock is
// freed, so it never holds another lease. The server ignores an interrupt
// that reaches the session before the waiting statement does, so the
// interrupt is sent again every 100ms until the statement has returned: a
// cancelled Acquire returns within about that (300 cancels swept over
// 0-5ms, TestCancelSweep). On MySQL and MariaDB each GET_LOCK waits at
// most a second and is sent again after the context is checked, so even a
// wait whose interrupts all miss (no connection free to send them from)
// ends within a second of its cancel. pg_advisory_lock has no such bound
// (a lock_timeout would send each waiter to the back of the server's
// queue once a second): there, a wait
// whose interrupts cannot be sent lasts until the holder lets go.
// [WithWaitSessions](0) keeps every wait out of the server: 200 waiters
// then need no more connections than one.
//
// # Loss
//
// Each pinned session that holds locks is pinged every [WithCheckInterval]
// (default 1s): one round trip per session, however many locks it holds. A
// session that fails its check or any statement is closed (never returned
// to the pool, where its locks would be stranded) and every lease on it
// ends: Done() closes and Err() matches [sqllock.ErrLockLost], so
// [sqllock.Do] cancels its function. Statements on pinned sessions run
// detached from the caller's context: a cancelled statement can close its
// connection (go-sql-driver/mysql does), which would end every lock on it.
//
// On PostgreSQL through github.com/jackc/pgx/v5/stdlib on Linux, a session
// the server ends (pg_terminate_backend, idle_session_timeout, a crash or
// restart) is noticed without waiting for the ping: the pinned
// connection's socket is watched, never read, and the FATAL error the
// server sends before it frees the session's locks ends the leases at once
// (a median under half a millisecond after pg_terminate_backend returns,
// 25 kills on a loaded machine, TestSessionKillNotice). The ping is still what
// notices a silent network partition. On MariaDB the driver does not expose
// its socket: a KILL CONNECTION is noticed by the ping, within about one
// interval, while the server hands the key on at once.
//
// The notice is not the guarantee. When a session is killed the server frees
// its keys at once, possibly before its holder has noticed. What protects
// the resource is the fencing token: [Lease.Token] is drawn from a sequence
// by the very statement that takes the lock, and only when it is granted.
// On PostgreSQL the token carries an era in its high bits, the server's
// timeline and the crash recoveries on it, so that a promoted standby's
// tokens, and those after a crash, are larger; which lets a pinned session
// draw it from an unlogged sequence of its own, writing no WAL (migrations
// 00020 and 00021, docs/operations.md):
//
//	SELECT CASE WHEN pg_try_advisory_lock($1) THEN sqllock_next_token_async() END
//	SELECT IF(GET_LOCK(?, 0) = 1, NEXTVAL(sqllock_fence_seq), NULL)
//
// The token is most of what an advisory lock costs over the bare lock
// function on PostgreSQL (docs/performance.md). A caller that never
// fences can take locks without it, [WithoutToken]: every Token is 0,
// which package fence refuses, and nothing stops a holder paused past the
// loss of its session from writing after its successor.
//
// # Keys
//
// A key becomes the lock name "namespace:key" ([LockName]; namespace
// "sqllock" unless [WithNamespace] says otherwise). PostgreSQL gets a 64-bit
// id from it, the first 8 bytes of its SHA-256 ([PostgresKey]), not a 32-bit
// checksum: among n keys held at once the chance that any two share an id is
// about n²/2⁶⁵ (3·10⁻⁸ for a million keys), and a collision only makes two
// keys exclude each other, never lets two holders in. MySQL and MariaDB get
// the name itself when it is lower-case ASCII, digits and "_-.:/" of at
// most 64 bytes, and otherwise a folded prefix plus 128 bits of SHA-256
// ([MySQLName]): MySQL 8 compares names without regard to case, and
// both MySQL-family paths ([sqllock.MariaDB], [sqllock.MySQL]) take
// this one name, so replicas on each, while a fleet moves from one path to
// the other, exclude each other. Both mappings are fixed by golden tests:
// changing them would let two versions of an application hold the same key
// at once. (Earlier versions locked [LegacyMariaDBName], the name as written, on
// the MariaDB path: stop every replica of such a version before starting
// one of this.)
//
// # Shared mode and transactions (PostgreSQL)
//
// [Locker.AcquireShared] and [Locker.TryAcquireShared] ([SharedLocker]) take
// the read side of the same lock: readers share it, a writer excludes them.
// [Locker.AcquireTx] and [Locker.TryAcquireTx] take pg_advisory_xact_lock in
// the caller's transaction; the lock ends with it.
//
// # Where session locks do not work
//
//   - Behind a transaction-pooling proxy (PgBouncer in transaction mode) a
//     pinned *sql.Conn is not a pinned server session: a lock taken on one
//     server session and released on another stays held until the first
//     session ends, stranding the key. Use [Locker.AcquireTx] there (the
//     lock lives and dies with one transaction, which the proxy keeps on one
//     server session), or tablelock. Session pooling mode is fine.
//   - GET_LOCK is local to one server: on Galera-style multi-writer clusters
//     (MariaDB Galera, Percona XtraDB Cluster) two nodes grant the same name
//     to two clients. Send all lock traffic to one node, or use tablelock.
//   - MySQL named locks have no shared mode and are not transactional:
//     the shared and transaction forms return [sqllock.ErrUnsupported].
//
// # Close
//
// A [Locker] is an [io.Closer], and [Locker.Close] means what it means in
// every strategy of this module:
//
//   - Acquisitions after Close are refused with an error matching
//     [sqllock.ErrClosed] that names the key; an Acquire blocked at that
//     moment returns an error matching both [sqllock.ErrClosed] and
//     [sqllock.ErrNotAcquired].
//   - Every key the Locker holds is freed in the server (one unlock-all
//     statement per pinned session), and those leases end as lost: Done is
//     closed and Err matches [sqllock.ErrLockLost] with the cause "the
//     Locker was closed". Their first Release returns that loss, later ones
//     [sqllock.ErrReleased]. Lost, not released: the holder's work was cut
//     short, and [sqllock.Do] cancels it.
//   - The session checkers stop before Close returns, and the statements
//     prepared on the pinned sessions are closed with them.
//   - The *sql.DB is the caller's: Close never closes it.
//
// Close is idempotent: later calls return nil.
package advisory
