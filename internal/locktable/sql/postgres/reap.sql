WITH d AS (
	DELETE FROM "sqllock_locks" WHERE lock_key IN (
		SELECT lock_key FROM "sqllock_locks"
		WHERE expires_at < now() - $1 * interval '1 microsecond'
		LIMIT $2 FOR UPDATE SKIP LOCKED)
	AND expires_at < now() - $1 * interval '1 microsecond'
	RETURNING lock_key, owner
)
SELECT count(*), 0::bigint FROM d
