// Package fence lets the protected resource check fencing tokens, so that a
// holder whose lease ended without its knowing cannot overwrite the work of
// the holder after it.
//
// # Why a lease is not enough
//
// A lease ends by time or by a lost session, and its holder learns of it
// only when it next looks. Holder A checks that it holds the key, then
// stalls: a garbage-collection pause, a stopped VM, a slow disk, a request
// stuck in a proxy. Its lease runs out, the database hands the key to B, B
// does its work and writes. A resumes and, having already checked, writes
// too, over B's result. No check on A's side closes that gap, since A can
// stall between any check and the write. Asking the database first does
// not help either: the answer is stale by the time the write lands.
//
// # How the fence closes it
//
// Every lease carries a token ([sqllock.Lease.Token]) drawn from one
// sequence by the statement that took the key, so each new holder of a key
// has a larger one. The resource keeps, per resource name, the largest
// token a write has carried, and a write is applied only if its token is
// not smaller:
//
//	INSERT INTO sqllock_fence_tokens (resource, last_token) VALUES ($1, $2)
//	ON CONFLICT (resource) DO UPDATE SET last_token = EXCLUDED.last_token
//	WHERE sqllock_fence_tokens.last_token <= EXCLUDED.last_token
//
// [Fence.Check] runs that statement in the caller's own transaction, before
// the write it guards, and returns an error matching [sqllock.ErrStaleToken]
// when a larger token was recorded; the caller rolls back. The check and the
// write commit together, and the row lock the check takes holds off every
// other fenced writer of the resource until then, so they are applied in
// token order or not at all. In the story above B's write raised the
// resource's token past A's, and A's write is refused whenever it arrives.
//
// A token equal to the recorded one is accepted: a holder may write many
// times under one lease. Only a strictly smaller token is stale.
//
// # Handing the token to the write
//
// Inside [sqllock.Do] (or DoAll, DoLease) the context carries the lease, so
// the token need not be threaded through the layers by hand:
// [Fence.Guard] reads it from the context, and refuses without touching the
// database when the lease has already ended (an error matching
// [sqllock.ErrLockLost]). [Fence.Write] wraps the usual shape: begin a
// transaction, Guard, run the caller's writes, commit.
//
// # Only what the transaction writes
//
// The fence refuses a stale holder's transaction, and nothing else: what
// Write's callback does outside tx (appending to a file, a call to a
// service) goes ahead whatever the fence decides, and after a loss it can
// land after the next holder's write. A resource outside the database
// must refuse older tokens itself: a local file through package
// github.com/sqllock/sqllock/fence/filefence, a service or object store by
// the token sent with the write (the repository's docs/fencing.md gives a
// recipe per resource).
//
// # Claim on takeover: raise the fence before you read
//
// The fence refuses an old holder only once the new holder's token is
// recorded. A new holder that first reads the state it will act on (a
// task's progress, a cursor) and writes later leaves a gap: the old
// holder, not yet told of its loss (a force release, an expiry during a
// pause; it learns at its next renewal), can still write in between,
// accepted, and the new holder then acts on a state that is no longer
// true. So a new holder calls [Fence.Claim] for its resources first, then
// reads: from the moment the claim commits, every write under an older
// token is refused, and the state it reads is final as far as older
// holders go. This is the pattern for any holder that resumes work left
// by another; Claim costs one statement per resource. The package's
// Example_claim shows it.
//
// # One key per resource, and what tokens are
//
// Tokens come from one sequence shared by every key and strategy of the
// database, so a key's tokens increase but are not consecutive: gaps mean
// nothing (other keys drew the numbers between, or refused tries,
// rollbacks and server restarts skipped them). Compare tokens, never count
// them.
//
// For the same reason a fence resource must be guarded by one key: the
// holders of two unrelated keys hold their locks at the same time, and the
// one with the smaller token would be refused by the other's write,
// though nothing is wrong. Name the resource after the key (or the data
// the key guards), and guard a resource shared by several keys with a set
// taken by sqllock.AcquireAll, whose token fences them all.
//
// Under rowlock, check in the lease's own transaction (rowlock.TxFrom):
// the fence, the work and the lock then commit in one step.
//
// The holder-side refusal is a courtesy that saves a round trip; the
// database-side check is the guarantee.
//
// # The table
//
// Migration 00005 creates sqllock_fence_tokens ([DefaultTable]) beside the
// lock tables. The check must run in the transaction of the write, so the
// fence table must live in the resource's database: for a resource kept
// elsewhere, create one there with [CreateTable] (or [Schema]) and name it
// with [WithTable]. Table names are validated as identifiers and quoted;
// resource names and tokens are bound parameters. Resource names follow
// the rules of lock keys ([sqllock.ValidateKey]); they need not equal the
// key that guards them.
//
// Concurrency notes: at READ COMMITTED (PostgreSQL's default) and
// REPEATABLE READ (MariaDB's) a fenced writer waits for the one ahead of it
// and then sees its token. At PostgreSQL's REPEATABLE READ or SERIALIZABLE
// it gets a serialization failure instead, and MariaDB may pick one of two
// first writers of a new resource as a deadlock victim: both are transient,
// and [Fence.Write] retries them itself, since they happen before the
// caller's writes run. SQLite serializes writers by itself.
package fence
