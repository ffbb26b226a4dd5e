-- Release in fair order. $1 key, $2 owner, $3 token, $4 keep µs
-- (jobguard's hold-at-least: a freed row expires when its last hold
-- began plus keep); $5 the table's channel, $6 the call channels'
-- prefix. The holder gives one hold back.
-- Its commit waits for the WAL flush where it granted the row or keeps
-- it ($4 > 0): a grant is a take. Otherwise it does not: lost in a crash,
-- the release leaves the key held until its expiry, as the holder had
-- it, and whoever takes the key next commits after it, flushing it too.
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
-- A grant is not notified here, unlike where releases are only announced
-- (release.notify.sql): a commit that notifies holds a lock of the whole
-- cluster until it is done, and a grant's waits for its WAL flush, so
-- the grants of every hot key would flush one at a time. The statement
-- leaves the grant's calls in the session instead (sqllock.calls, a
-- setting of the session, which outlives the commit: the key, the
-- releaser's token, the grantee Locker's call channel and those of the
-- two Lockers queued next unless they are the grantee's own, and the
-- grant as JSON after a g), and notify_grant, sent with it in one round
-- trip, sends them in a commit of its own that does not wait for its
-- flush. The two copies let those Lockers look when the grant's window
-- ends (the grantee may be gone). A call lost between the two (the
-- releaser's connection gone) costs the grantee and the entries behind
-- it the wait bound, as any lost call does.
-- Otherwise the NOTIFY rides in the same statement, delivered only if it
-- commits: a key a refused claim marked wanted is announced to every
-- listener on the table's channel; a call is sent to the Locker popped
-- and copied to the two queued next, which look by themselves if the key
-- is not taken soon (callGrace). A key nobody waits for is not
-- announced.
WITH r AS (
	UPDATE "sqllock_locks" SET
		hold_count  = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN 1 ELSE hold_count - 1 END,
		owner       = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN (waiters[1]).owner WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at  = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN now() + (waiters[1]).claim_us * interval '1 microsecond'
			WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END,
		host        = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN (waiters[1]).host ELSE host END,
		token       = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN sqllock_next_token() ELSE token END,
		acquired_at = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN now() ELSE acquired_at END,
		called      = CASE WHEN hold_count <= 1 AND (cardinality(waiters) = 0 OR (waiters[1]).claim_us = 0 OR acquired_at + $4 * interval '1 microsecond' <= now()) THEN waiters[1] WHEN hold_count <= 1 THEN NULL ELSE called END,
		waiters     = CASE WHEN hold_count <= 1 AND (cardinality(waiters) = 0 OR (waiters[1]).claim_us = 0 OR acquired_at + $4 * interval '1 microsecond' <= now()) THEN waiters[2:] ELSE waiters END
	FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after,
		acquired_at = now() AND (called).claim_us > 0 AS granted,
		set_config('synchronous_commit', CASE WHEN $4::bigint <> 0 OR (acquired_at = now() AND (called).claim_us > 0) THEN sc.sc0 ELSE 'off' END, true)
)
SELECT CASE WHEN granted THEN set_config('sqllock.calls', json_build_object('key', lock_key, 'released', $3::bigint,
			'channels', array_remove(ARRAY[$6 || (called).caller,
				CASE WHEN (next).caller <> (called).caller THEN $6 || (next).caller END,
				CASE WHEN (after).caller <> (called).caller THEN $6 || (after).caller END], NULL),
			'payload', 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text, false)
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify($5, lock_key)::text
	WHEN (called).caller IS NOT NULL THEN pg_notify($6 || (called).caller, (called).caller || lock_key)::text
		|| CASE WHEN (next).caller IS NOT NULL THEN pg_notify($6 || (next).caller, (called).caller || lock_key)::text ELSE '' END
		|| CASE WHEN (after).caller IS NOT NULL THEN pg_notify($6 || (after).caller, (called).caller || lock_key)::text ELSE '' END END FROM r
