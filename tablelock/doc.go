// Package tablelock implements [sqllock.Locker] with rows of a lock table,
// on PostgreSQL, MySQL/MariaDB and SQLite alike. It needs no session state:
// a held key costs no connection, works behind transaction-pooling proxies,
// and survives the holder's connections coming and going.
//
//	l, err := tablelock.New(db, dialect, tablelock.WithTTL(30*time.Second))
//	defer l.Close()
//	err = sqllock.Do(ctx, l, "reports/nightly", func(ctx context.Context) error {
//		// ctx ends if the lease is lost; its token fences the writes
//		return f.Write(ctx, db, "reports/nightly", writeReport)
//	})
//
// It is the default strategy: start here unless the table in the README
// says otherwise. Most programs need only [New] and [sqllock.Do], which
// acquires, runs the function with a context that ends the moment the
// lease is lost, and releases; hand the lease's token to the protected
// writes through package fence (a holder resuming another's work claims
// first: fence.Claim). [sqllock.Hold] keeps a key for a long-running
// worker, [sqllock.AcquireAll] takes several in a deadlock-free order. Run
// migrations.Up once at start. The Example below shows what a lease is
// underneath: an owner, reentrant holds, the token, what an operator sees.
//
// # Leases
//
// A lease is a row of the table (sqllock_locks, from migration 00001;
// [WithTable] names another, made with [CreateTable]): the key, its owner
// and the owner's host, a hold count, the fencing token, and when it was
// acquired and expires. The key is held while its expiry is ahead of the
// database clock. Every comparison of times runs on that clock, inside the
// statements; the clocks of the clients never decide who holds a key.
//
// A held lease is renewed every [WithRenewInterval] (TTL/3 by default; the
// TTL is [WithTTL], 30s by default) by one goroutine per held row, which
// lives with the lease, not with the context of the Acquire that took it.
// A renewal that fails for a transient reason (a dropped connection, a
// deadlock, a busy database) is retried. A holder that cannot renew counts
// its lease lost a safety margin ([WithSafetyMargin], TTL/10) before the
// database would hand the key to anyone else, so it learns of the loss
// first: [Lease.Done] closes, [Lease.Err] matches [sqllock.ErrLockLost]
// (it reads the deadline itself, so a holder resumed from a long pause
// knows at once), and [sqllock.Do] cancels its function.
//
// On PostgreSQL a release commits without waiting for its WAL flush (or
// for a synchronous standby): what it loses in a server crash, or in a
// failover to a standby that had not received it, is only a release, and
// the key then stays held until its expiry, as if the holder had died.
// Nobody can take the key in the meantime without a commit after the
// release's, and that commit, durable, makes the release durable too.
// Takes, renewals and extensions wait for the flush, since a holder that
// believes in a lease the database forgot breaks mutual exclusion, and so
// does a release that holds a key on (jobguard's Job.AtLeast).
//
// # Extend
//
// [Lease.Extend] (or [sqllock.Extend] on any lease) moves a held row's
// expiry to at least d from now, on the database clock: for a holder about
// to block longer than its TTL without a chance to renew. Nothing ever
// shortens an expiry: the automatic renewals that follow leave a longer
// extension in place, and go on keeping the lease once it has run out.
// The holder's loss deadline moves with it, a safety margin before. The
// price: a holder that dies keeps its key until the extended expiry, not
// one TTL ([Locker.ForceRelease] frees it sooner). Release frees the key
// at once. An Extend that finds the row no longer its holder's returns an
// error matching [sqllock.ErrLockLost] and ends the lease.
//
// # Owners and reentrancy
//
// The owner is the one in the context ([sqllock.WithOwner]), or a fresh
// random one for each call, so goroutines sharing a [Locker] exclude each
// other. An owner that holds a key acquires it again at once: the hold
// count grows, the token stays, and the key is free after as many
// Releases. Owners, like keys, compare byte for byte.
//
// # Waiting
//
// A blocked [Locker.Acquire] holds no connection between its tries, but
// for the gate wait on MariaDB below. The
// waiters of a key in one Locker queue in arrival order, and a release
// through the Locker wakes the first of them at once; a cancelled waiter
// passes its wake-up on. Releases in other processes reach a waiter as
// the dialect allows:
//
//   - PostgreSQL: the statements that free a key (Release, ReleaseKey,
//     ForceRelease, Close, the reaper) NOTIFY it on the table's channel, and
//     one connection per Locker LISTENs while any of its Acquires waits
//     ([WithNotify]; it needs the pgx stdlib driver), but over a pool of
//     one connection, where its waiters poll. Unless woken, a waiter
//     looks again when its holder's lease would expire, or after the
//     bound (below) if that comes first. A release wakes someone only when a
//     claim was refused since its holder took it: a waiting Locker's
//     refused claim queues the Locker in the row (column waiters, once per
//     Locker), before its waiter sleeps, and the release pops the first
//     queued Locker under the row lock and calls it alone, on a channel of
//     that Locker's own, so no wake-up is lost and the other waiting
//     Lockers sleep on: waking all of them sent them to the row together,
//     where all but one were refused in a queue on its row lock. A called
//     Locker that no longer waits announces the key to all at once. A
//     Locker none of whose Acquires waits for a key any more (they gave
//     up, or won) leaves no entry behind: the last to give up takes it out
//     of the row, one statement in the background after its own take in
//     flight, and [Locker.Close] takes out those still queued; only a
//     crashed Locker leaves its entry to be called. The
//     two Lockers queued next hear a copy of the call, and look by
//     themselves 50ms after the last copy they heard for the key: so one
//     that is gone (crashed, closed) is passed over, and the next too if
//     it is gone as well; more gone Lockers ahead cost a waiter at most
//     the bound. Other refused claims (TryAcquire,
//     a full queue of 64) mark the row wanted, and its release announces
//     the key to every Locker. Releases nobody waits for send nothing: a
//     transaction that queued a NOTIFY takes a database-wide lock at
//     commit, which would serialise every release behind every other. A
//     refused claim commits without waiting for its WAL flush; it changed
//     only the queue or the mark. A claim that finds another owner's live
//     row with its Locker already queued (or the row marked) only reads:
//     no row lock, no write, like a raw poller's INSERT ... ON CONFLICT DO
//     NOTHING.
//   - PostgreSQL, a key held by a Locker in another process: the waiter
//     waits in the server at the key's turn gate ([WithTurnGates], on by
//     default), a session advisory lock that the holder keeps, on a
//     pooled session of its own, while it holds the row. The waiter's
//     take rides behind its wait in the same round trip, and the
//     holder's release and the gate's unlock go out together, the unlock
//     after the release's commit: the server runs the next take the
//     moment the key is free, with no client round trip between, and in
//     the order the waits were asked. A Locker's first waiter for a key
//     waits at the gate (the others wait in the process); one that gets
//     the gate and finds the key held by a holder that keeps none (a
//     plain take, an older build) keeps the gate, first in line, and
//     looks at the row again soon, then less often, until the wake-ups
//     above or its look find the key free. The row stays the only truth,
//     and every wait at a gate ends by itself at the bound. A gated wait
//     or hold pins one session, at most four per Locker (half the
//     connections above two of a capped pool, shared with MariaDB's
//     gates); beyond them, in fair order and behind a transaction pooler,
//     waiters wait as above.
//   - MariaDB: the waiter blocks in the server. A Locker keeps a gate for
//     each key it has held for 2ms or more: a named lock (GET_LOCK, named
//     by a digest of the table and key, so that MariaDB's case-blind lock
//     names cannot merge two keys) on one session of its own, let go of
//     only after the release committed. The first waiter of a key in a
//     Locker, once its refused claim shows a holder old enough to keep a
//     gate, waits for it in the server, for the holder's remaining lease
//     but never longer than the wait bound ([WithWaitBound], 1s) at a
//     time, and the server wakes it when the holder lets go; it then
//     claims the row as ever. A wait that hears nothing ends by itself at
//     the bound and claims again, so a waiter sleeps at most the bound
//     past a release whatever keeps the gate: a holder whose key an
//     operator freed ([Locker.ForceRelease]) keeps its gate until its next
//     renewal tells it (TTL/3), and its successor keeps none until then
//     (measured: the waiter got the key 0.82-0.88s after the successor's
//     release, against 9.9s at a TTL of 30s before the bound). Waiting
//     costs one claim and one gate wait per bound and key. The row stays the only truth: a gate says "look
//     again", never "yours", so a holder whose gate session died still
//     holds by its row, and a waiter let through a gate nobody keeps finds
//     the key held and polls as below before it blocks again. Holds
//     released within 2ms take no gate (under load most are, and a gate
//     costs two statements); their waiters poll. Sessions: one per Locker
//     for all its gates, while it holds a key and 2s after; per key
//     waited for, per Locker, one for its first waiter's place in line
//     and one while it blocks on the gate, at most 4 at once. The
//     Lockers sharing one pool capped by SetMaxOpenConns share its gate
//     sessions: half of its connections above two (none below a
//     cap of 4), the rest left to takes, renewals and releases; a holder
//     that finds none free keeps no gate, and a waiter that finds none
//     polls. A wait that ends early (its context, a wake-up in this
//     process, [Locker.Close]) has its session ended on the server (KILL
//     CONNECTION, which needs no privilege for the pool's own user's
//     sessions) and discarded, so no statement is left waiting, even when
//     the wait had not reached the server yet (MariaDB forgets a KILL
//     QUERY that finds the session idle). The waiters of a key in every
//     process also stand in a line, another named lock that the server
//     grants one session at a time in the order asked: the first waiter of
//     each Locker to find the key held joins it and waits there, sending
//     nothing, until those ahead took the key; then it polls (from 1ms at
//     each new holder) or blocks on the gate. A line wait ends by itself
//     at the wait bound, and its waiter polls as without a line. Waiters
//     that found the key held are served in their order of arrival (a
//     new Acquire's first claim still takes a key free at that moment),
//     so a hot key's wait lasts about a round of the line, not as many
//     polls as it loses. [WithNotify](false) turns gates and lines off.
//     The MySQL path ([sqllock.MySQL]) has neither: a Galera node's named
//     locks are its own.
//   - SQLite: the waiter blocks on a named pipe. A Locker keeps a gate for
//     each key it has held for 2ms or more: a named pipe (FIFO), named by
//     the same digest of the table and key, in a folder beside the
//     database file (app.db-sqllock-gates for app.db, made on first use),
//     which it holds open until the release committed, and then removes.
//     The first waiter of a key in a Locker opens the pipe and sleeps in
//     Go's poller until no process holds it open: the holder let go, or
//     died (the kernel closes a killed process's files, kill -9 included),
//     for the holder's remaining lease but never longer than the bound; it
//     then claims the row as ever. A pipe nobody holds open (a holder
//     younger than 2ms, an in-memory database, a folder it cannot write)
//     tells the waiter so at once, and it polls as below. A holder that
//     dies leaves its pipe behind, an empty file the key's next gated
//     holder reuses and removes. Windows has no such pipes: waiters poll.
//     [WithNotify](false) turns gates off.
//   - MySQL path, MariaDB and SQLite waiters without a gate to wait
//     on: waiters poll with exponential backoff and
//     jitter, capped by [WithMaxBackoff] (100ms), and at 16ms after a
//     refusal that names a new holder (the key changes hands faster than
//     the waiter backed off, and a waiter backed off longest would lose
//     every turn); the first in the queue polls from the bottom of the
//     range, the others at the cap. On SQLite
//     a poll reads before it writes, so pollers do not queue for the single
//     write lock ahead of the holder's renewals and release.
//
// Fair order ([WithFairness], PostgreSQL only): a waiting Acquire queues
// an entry of its own in the row (its owner, host and claim window), and
// a release that finds an entry first grants the key to it in the same
// statement: the row names the entry's owner, under a new token drawn
// under the row lock, for the claim window ([WithClaimWindow], 250ms by
// default), and the release calls the entry's Locker with the token. A
// waiter whose queuing take was recent holds the grant as it is (its
// renewal extends it to its TTL); one that queued long before claims it
// with a take first. So waiting Acquires are served in the order they
// queued in the row, which across processes is the order in which their
// first refused claims reached it. A waiter that finds its row granted to
// it (it looked again after a reconnection, or after the bound) claims it
// the same way. A grant that reaches a waiter that gave up, or a Locker
// that closes, is given back at once, and the row goes to the entry
// queued next. A grant nobody claims (the waiter's process died, its
// Locker closed) lapses when the window ends, and the two entries queued
// next, which heard a copy of the grant, look then: a grantee that is
// gone costs those behind it the window and at most the bound, not a
// TTL. A waiter that gives up while its take waits for the row lock
// leaves the queue after that take commits: a Locker runs the statements
// of one key in fair order one at a time.
//
// Fair order is not the default. A release that grants commits
// durably, and PostgreSQL holds a lock of the whole cluster through a
// commit that notifies, its WAL flush included, so grants that notified
// in their own commits would flush one at a time across every hot key.
// The grant's calls go out instead in a statement of their own, sent in
// the same round trip, whose commit does not wait for a flush (a call
// lost between the two costs the grantee the bound). Measured on
// PostgreSQL 15 (2 cores, 2 December; N keys with M Lockers each, each
// Locker on a pool of its own, 4 s, eight rounds alternated with the
// build whose grants notified), fair order served 0.94-1.08 of the
// default order's turns on 1 key of 8 Lockers, 1.03-1.09 on 4 keys of 4
// and 1.01-1.11 on 8 keys of 3, where grants that notified served
// 1.12-1.23, 0.94-1.02 and 0.81-0.89: a tenth fewer turns on one hot
// key, a quarter more on eight (docs/performance.md). It also needs
// LISTEN, so no transaction pooler, and a grantee that is gone costs
// those behind it the claim window. At worst a fair waiter costs what
// any waiter does, the bound (below), plus the claim window of each
// grantee ahead of it that is gone.
//
// Every wait is bounded: a blocked Acquire that hears nothing looks at its
// key again within [WithWaitBound] (1s by default; sooner when the
// holder's lease ends sooner), whatever it waited for: a NOTIFY, a call, a
// grant, a gate. The wake-ups are the fast path, and the bound the safety
// net: a wake-up lost (a notice unheard, a called or granted Locker gone,
// a gate kept by a holder that lost its key) costs a waiter at most the
// bound, never a lease. An idle waiting Acquire costs about one statement
// per bound (measured: 1.0 a second on PostgreSQL with the default);
// on PostgreSQL a look of a waiter already queued behind a live holder
// only reads. Sessions: a waiting Acquire holds one only while its
// statement runs, and a Locker one more to listen on PostgreSQL (and its
// gates on MariaDB, above). In fair order a Locker runs the statements of
// a key one at a time, so Acquires cut off one after another do not pile
// up on the row lock: 8 fair Lockers whose 480 Acquires were cut off
// after 5-35ms held at most 16 server sessions at once (91 before), and
// left no entry queued (53-57 before).
//
// An Acquire whose context ends while its statement is in flight returns
// at once with an error matching both [sqllock.ErrNotAcquired] and the
// context's error. Its statement runs on under its own timeout, since a
// cancelled statement can still commit, and whatever it took is given back
// as soon as it returns; [Locker.Close] waits for that.
//
// # Fencing
//
// [Lease.Token] is drawn by the statement that takes the row, while it
// takes it: from the shared sequence sqllock_fence_seq on MariaDB, through
// sqllock_next_token() on PostgreSQL (the sequence with the server's
// timeline in the high bits, so tokens do not go back when a standby is
// promoted), from the sqllock_fence row on SQLite, which the table's
// triggers bump in the same statement. It is strictly larger for each new holder of a key; reentrant
// holds share it. Hand it to the protected resource (package fence) so
// that a holder paused past its lease cannot overwrite its successor's
// work. [WithAsyncCommit] trades some of the durability behind these
// guarantees for speed on PostgreSQL; read its caveats.
//
// # SQLite
//
// SQLite has one writer at a time, and a renewal is a write: it cannot
// run while the holder's own application (or anyone else) is inside a
// write transaction. A renewal that finds the write lock taken looks
// again every millisecond, with SQLite's busy handler off for it (that
// handler sleeps up to 100ms between looks and misses the gaps between
// an application's transactions), so it takes the lock in the first gap
// of a millisecond or more. What a TTL allows, then, is write
// transactions no longer than the TTL minus the safety margin minus the
// renew interval: about 0.57 TTL with the defaults (17s of the default
// 30s). Measured with a 2s TTL, transactions back to back 5ms apart:
// 0.8s, 1.0s, 1.1s and 1.2s each kept the lease 3 times of 3, 1.4s
// lost it 3 of 3; 1ms apart, even 0.8s lost it once in 3. A renewal kept
// out past the safety margin ends the lease with a loss that says so:
// "not renewed before the safety margin: database busy: another
// transaction held SQLite's write lock for 598 ms". Keep write
// transactions short, or raise the TTL; a holder paused inside a write
// transaction blocks every writer, other holders' renewals included.
//
// On a pool without a SetMaxOpenConns limit, a Locker keeps one
// connection of its own until Close, with SQLite's busy handler off, and
// runs its takes and releases there without a context that can end (so
// no goroutine per statement watches one); a write lock held elsewhere is
// waited for in Go, on the busy handler's schedule, within the pool's
// busy_timeout and the caller's context.
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
//   - Every key the Locker holds is freed (announced to waiters elsewhere
//     on PostgreSQL), and those leases end as lost: Done is closed and Err
//     matches [sqllock.ErrLockLost] with the cause "the Locker was closed".
//     Their first Release returns that loss, later ones
//     [sqllock.ErrReleased]. Lost, not released: the holder's work was cut
//     short, and [sqllock.Do] cancels it. The leases end before their keys
//     are freed, so no one else holds a key while its old holder still
//     believes it does.
//   - The renewals, the listener and the gates stop, the give-backs of cancelled
//     Acquires finish, and the prepared statements are closed before Close
//     returns.
//   - The *sql.DB is the caller's: Close never closes it.
//
// Close is idempotent: later calls return nil.
//
// # Operators
//
// [Locker.List] shows the keys held now ([Info]: owner, host, holds,
// token, how long held). [Locker.ForceRelease] frees a key for an operator,
// if the holder List showed still has it (named by its token): its holder
// finds out at its next renewal. Every force release is audited: the
// transaction that frees the key writes the holder it freed, the
// operator's hostname/pid and the [Reason] to the table sqllock_audit
// (migration 00009), which [AuditLog] reads. [Locker.ReleaseKey] gives back one hold of
// the owner in the context, for a process that restarted with a persistent
// owner and no longer has its lease object. The sqllock command's locks
// subcommand does the same from a shell.
//
// # Rows and the reaper
//
// A released row stays in the table, free, so a key used again reuses it.
// Tables whose keys come and go keep every key they ever saw; package
// reaper deletes rows expired for a while, in bounded batches. It is
// housekeeping: an expired row is taken over with or without it. On
// MariaDB a release keeps the row rather than deleting it, though an
// insert and a delete cost the server less than two updates: a take's
// insert would draw its fencing token before it locks the key, where a
// take of a kept row draws it under the row lock.
//
// # Statements and drivers
//
// Statements are prepared once per connection, except with
// [WithTransactionPooler], which runs them unprepared through
// database/sql. On PostgreSQL through the pgx stdlib driver, a lease's
// statements (take, renewal, release) run on the pgx connection under a
// pooled database/sql connection, prepared and cached by pgx: that costs
// the client less than a database/sql prepared statement. Through
// another driver they run as database/sql prepared statements.
package tablelock
