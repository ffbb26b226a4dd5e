-- Void, fair order: a grant nobody took as its own (its waiter gave up,
-- or its Locker closed) is given back like a release, which grants the
-- row to the entry queued next. $1 key, $2 owner; $3 the grant's token,
-- or, with $3 = 0, any token above $4 (a grant of the entry its Locker
-- holds under an older token is in use); $5-$8 the entry (caller,
-- claim_us, owner, host); $9 the table's channel, $10 the call channels'
-- prefix. Once taken (a take with accept) called no longer names the
-- entry, and this changes nothing.
-- Its commit waits for the WAL flush, with Config.AsyncCommit too.
--
-- The last hold (hold_count <= 1) pops the first queued entry, read
-- under the row lock. A fair waiter's entry (claim_us > 0) is granted the
-- row where it is free at once: the entry's owner holds it, one hold,
-- under a new token drawn after the row lock, for the entry's claim
-- window, and called keeps the entry until the grantee claims the row (a
-- take with accept). A fair entry stays queued while the row is kept: its
-- waiter looks when the row expires. Any other entry (a Locker's id) is
-- called: it looks, alone. Every right-hand side reads the row before the
-- update.
--
-- The NOTIFY rides in the same statement and is delivered only if it
-- commits: a key a refused claim marked wanted is announced to every
-- listener on the table's channel; a grant is sent to the grantee's
-- Locker on its own channel (the call prefix and its id), with the token
-- and the entry as JSON, and copied to the two Lockers queued next, which
-- look when the grant's window ends (the grantee may be gone), unless
-- they are the grantee's own (its waiter may hold the grant without a
-- claim, and a Locker voids a grant it hears with no waiter); a call is
-- sent to the Locker popped and copied to the two queued next, which look
-- by themselves if the key is not taken soon (callGrace). A key nobody
-- waits for is not announced: a transaction that queued a NOTIFY takes a
-- database-wide lock at commit.
WITH r AS (
	UPDATE "sqllock_locks" SET
		hold_count  = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN 1 ELSE hold_count - 1 END,
		owner       = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN (waiters[1]).owner WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at  = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN now() + (waiters[1]).claim_us * interval '1 microsecond'
			WHEN hold_count > 1 THEN expires_at ELSE acquired_at END,
		host        = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN (waiters[1]).host ELSE host END,
		token       = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN sqllock_next_token() ELSE token END,
		acquired_at = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN now() ELSE acquired_at END,
		called      = CASE WHEN hold_count <= 1 THEN waiters[1] WHEN hold_count <= 1 THEN NULL ELSE called END,
		waiters     = CASE WHEN hold_count <= 1 THEN waiters[2:] ELSE waiters END
	WHERE lock_key = $1 AND owner = $2 AND called = ROW($5::text, $6::bigint, $7::varchar, $8::varchar)::sqllock_waiter
		AND (token = $3 OR ($3::bigint = 0 AND token > $4::bigint)) AND expires_at > now()
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after,
		acquired_at = now() AND (called).claim_us > 0 AS granted
)
SELECT CASE WHEN granted THEN pg_notify($10 || (called).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text
		|| CASE WHEN (next).caller <> (called).caller THEN pg_notify($10 || (next).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text ELSE '' END
		|| CASE WHEN (after).caller <> (called).caller THEN pg_notify($10 || (after).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text ELSE '' END
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify($9, lock_key)::text
	WHEN (called).caller IS NOT NULL THEN pg_notify($10 || (called).caller, (called).caller || lock_key)::text
		|| CASE WHEN (next).caller IS NOT NULL THEN pg_notify($10 || (next).caller, (called).caller || lock_key)::text ELSE '' END
		|| CASE WHEN (after).caller IS NOT NULL THEN pg_notify($10 || (after).caller, (called).caller || lock_key)::text ELSE '' END END FROM r
