-- Take. $1 key, $2 owner, $3 host, $4 TTL µs. The SET list sees the
-- row before the statement, so every CASE asks about the holder before
-- it. A free (expired) row is taken under a token drawn after the row
-- lock, larger than every earlier holder's; the owner's own row gets one
-- hold more. When the upsert takes nothing, the holder is read from the
-- statement's snapshot; a holder newer than the snapshot leaves no row.
WITH got AS (
	INSERT INTO "sqllock_locks" AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
	VALUES ($1, $2, $3, 1, sqllock_next_token(), now(), now() + $4 * interval '1 microsecond')
	ON CONFLICT (lock_key) DO UPDATE SET
		token       = CASE WHEN t.expires_at > now() THEN t.token ELSE sqllock_next_token() END,
		hold_count  = CASE WHEN t.expires_at > now() THEN t.hold_count + 1 ELSE 1 END,
		acquired_at = CASE WHEN t.expires_at > now() THEN t.acquired_at ELSE now() END,
		expires_at  = GREATEST(t.expires_at, EXCLUDED.expires_at),
		owner       = EXCLUDED.owner,
		host        = EXCLUDED.host
	WHERE t.expires_at <= now() OR t.owner = EXCLUDED.owner
	RETURNING t.token, t.hold_count
)
SELECT true, token, hold_count, '', 0::bigint FROM got
UNION ALL
SELECT false, token, hold_count, host, (extract(epoch FROM expires_at - now()) * 1000000)::bigint
FROM "sqllock_locks" WHERE lock_key = $1 AND NOT EXISTS (SELECT 1 FROM got)
