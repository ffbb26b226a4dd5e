-- ReleaseQuiet: on a quiet key the release first runs without the
-- queue and the calls, and only where nobody waits: the row is neither
-- marked nor has anyone queued, read under its row lock. A waiter that
-- queued before is seen, and the announced release runs after this one
-- changed nothing; one that tries after finds the key free.
-- A release that keeps nothing ($4 = 0) commits without waiting for its
-- WAL flush: lost in a crash, the key stays held until its expiry, as the
-- holder had it; a release that keeps the key (jobguard) stays durable.
UPDATE "sqllock_locks" SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END,
		called     = CASE WHEN hold_count <= 1 THEN NULL ELSE called END FROM (SELECT CASE WHEN $4::bigint = 0 THEN set_config('synchronous_commit', 'off', true) END) AS sc
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now() AND NOT wanted AND cardinality(waiters) = 0
