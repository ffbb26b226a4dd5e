WITH got AS (
	INSERT INTO "sqllock_locks" AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
	SELECT $1::varchar, $2::varchar, $3::varchar, 1, sqllock_next_token(), now(), now() + $4 * interval '1 microsecond' FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
	WHERE NOT EXISTS (SELECT 1 FROM "sqllock_locks" AS w
		WHERE w.lock_key = $1::varchar AND (w.wanted OR ($5::text <> '' AND $5::text = ANY(w.waiters))) AND w.expires_at > now() AND w.owner <> $2::varchar)
	ON CONFLICT (lock_key) DO UPDATE SET
		token       = CASE WHEN t.expires_at <= now() THEN sqllock_next_token() ELSE t.token END,
		hold_count  = CASE WHEN t.expires_at <= now() THEN 1 WHEN false THEN t.hold_count WHEN t.owner = EXCLUDED.owner THEN t.hold_count + 1 ELSE t.hold_count END,
		acquired_at = CASE WHEN t.expires_at <= now() THEN now() ELSE t.acquired_at END,
		expires_at  = CASE WHEN (t.expires_at <= now() OR t.owner = EXCLUDED.owner) THEN GREATEST(t.expires_at, EXCLUDED.expires_at) ELSE t.expires_at END,
		owner       = CASE WHEN (t.expires_at <= now() OR t.owner = EXCLUDED.owner) THEN EXCLUDED.owner ELSE t.owner END,
		host        = CASE WHEN (t.expires_at <= now() OR t.owner = EXCLUDED.owner) THEN EXCLUDED.host ELSE t.host END,
		wanted      = CASE WHEN t.expires_at <= now() THEN false WHEN t.owner = EXCLUDED.owner THEN t.wanted
			WHEN ($5::text <> '' AND cardinality(t.waiters) < 64) THEN t.wanted ELSE true END,
		waiters     = CASE WHEN (t.expires_at <= now() OR t.owner = EXCLUDED.owner) THEN array_remove(t.waiters, $5::text)
			WHEN ($5::text <> '' AND cardinality(t.waiters) < 64) AND NOT $5::text = ANY(t.waiters) THEN t.waiters || $5::text ELSE t.waiters END
	WHERE CASE WHEN (t.expires_at <= now() OR t.owner = EXCLUDED.owner) THEN true
		ELSE set_config('synchronous_commit', 'off', true) = 'off' AND NOT (t.wanted OR ($5::text <> '' AND $5::text = ANY(t.waiters))) END
	RETURNING t.owner = $2 AS won, t.token, t.hold_count, t.host, t.expires_at, $5::text = ANY(t.waiters) AS queued
)
SELECT won, token, hold_count, CASE WHEN won THEN '' ELSE host END,
	CASE WHEN won THEN 0::bigint ELSE (extract(epoch FROM expires_at - now()) * 1000000)::bigint END FROM got
UNION ALL
SELECT false, token, hold_count, host, (extract(epoch FROM expires_at - now()) * 1000000)::bigint
FROM "sqllock_locks" WHERE lock_key = $1 AND NOT EXISTS (SELECT 1 FROM got)
