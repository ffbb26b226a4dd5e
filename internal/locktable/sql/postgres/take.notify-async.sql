-- Take, with Config.AsyncCommit (every commit without waiting for its
-- WAL flush), where releases are announced. $1 key, $2 owner, $3 host, $4 TTL
-- µs; $5 the claimant's Locker id when it listens ('' when not): its
-- queue entry is ROW($5, 0, '', '') (a Locker that is called, not
-- granted).
--
-- The SET list sees the row before the statement. A free row (expired)
-- is taken with a token drawn after the row lock, so it is larger than
-- every earlier holder's. A refused claimant that listens queues its
-- entry (at most 64); anyone else marks the row wanted, and the release
-- wakes every listener. A refusal commits without waiting for its WAL
-- flush (the WHERE turns synchronous_commit off for this statement
-- alone): it changed only the queue and the mark, and a crash that lost
-- them also ends every waiter's listening session, whose reconnection
-- makes them look again.
--
-- A claim whose snapshot shows a live holder of another owner, with the
-- claimant already queued (or the row marked), proposes no row: it locks
-- and writes nothing and draws no token, like a raw poller's INSERT ...
-- DO NOTHING. A release after the snapshot calls this Locker (it listened
-- before it tried).
WITH got AS (
	INSERT INTO "sqllock_locks" AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
	SELECT $1::varchar, $2::varchar, $3::varchar, 1, sqllock_next_token(), now(), now() + $4 * interval '1 microsecond'
	FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
	WHERE NOT EXISTS (SELECT 1 FROM "sqllock_locks" AS w
		WHERE w.lock_key = $1::varchar AND w.expires_at > now() AND w.owner <> $2::varchar
		AND (w.wanted OR ($5::text <> '' AND ROW($5::text, 0, '', '')::sqllock_waiter = ANY(w.waiters))))
	ON CONFLICT (lock_key) DO UPDATE SET
		token       = CASE WHEN t.expires_at <= now() THEN sqllock_next_token() ELSE t.token END,
		hold_count  = CASE WHEN t.expires_at <= now() THEN 1 WHEN t.owner = EXCLUDED.owner THEN t.hold_count + 1 ELSE t.hold_count END,
		acquired_at = CASE WHEN t.expires_at <= now() THEN now() ELSE t.acquired_at END,
		expires_at  = CASE WHEN t.expires_at <= now() OR t.owner = EXCLUDED.owner THEN GREATEST(t.expires_at, EXCLUDED.expires_at) ELSE t.expires_at END,
		owner       = CASE WHEN t.expires_at <= now() OR t.owner = EXCLUDED.owner THEN EXCLUDED.owner ELSE t.owner END,
		host        = CASE WHEN t.expires_at <= now() OR t.owner = EXCLUDED.owner THEN EXCLUDED.host ELSE t.host END,
		-- a new holder clears the mark; a refusal that cannot queue sets it
		wanted      = CASE WHEN t.expires_at <= now() THEN false
			WHEN t.owner = EXCLUDED.owner THEN t.wanted
			WHEN $5::text <> '' AND cardinality(t.waiters) < 64 THEN t.wanted
			ELSE true END,
		-- a new holder leaves the queue; a refusal joins it, once
		waiters     = CASE WHEN t.expires_at <= now() OR t.owner = EXCLUDED.owner
				THEN array_remove(t.waiters, ROW($5::text, 0, '', '')::sqllock_waiter)
			WHEN $5::text <> '' AND cardinality(t.waiters) < 64
				AND NOT ROW($5::text, 0, '', '')::sqllock_waiter = ANY(t.waiters)
				THEN t.waiters || ROW($5::text, 0, '', '')::sqllock_waiter
			ELSE t.waiters END
	WHERE CASE WHEN t.expires_at <= now() OR t.owner = EXCLUDED.owner THEN true
		ELSE set_config('synchronous_commit', 'off', true) = 'off'
			AND NOT (t.wanted OR ($5::text <> '' AND ROW($5::text, 0, '', '')::sqllock_waiter = ANY(t.waiters))) END
	RETURNING t.owner = $2 AS won, t.token, t.hold_count, t.host, t.expires_at
)
-- The holder named and how long until its lease ends: a refusal reads
-- them from the update itself (after the row lock), a skipped claim from
-- its snapshot.
SELECT won, token, hold_count, CASE WHEN won THEN '' ELSE host END,
	CASE WHEN won THEN 0::bigint ELSE (extract(epoch FROM expires_at - now()) * 1000000)::bigint END FROM got
UNION ALL
SELECT false, token, hold_count, host, (extract(epoch FROM expires_at - now()) * 1000000)::bigint
FROM "sqllock_locks" WHERE lock_key = $1 AND NOT EXISTS (SELECT 1 FROM got)
