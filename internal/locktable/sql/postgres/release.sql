-- Release, releases not announced: $1 key, $2 owner, $3 token, $4 keep
-- µs. One hold is given back; with the last the row expires when that
-- hold began plus keep (jobguard's hold-at-least), not at this statement's
-- now(). A release that keeps nothing commits without waiting for its WAL
-- flush: lost in a crash, the key stays held until its expiry, as the
-- holder had it, and whoever takes it next commits after it, flushing it
-- too. One that keeps the key stays durable: lost, the row would expire
-- before the promised time.
UPDATE "sqllock_locks" SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END FROM (SELECT CASE WHEN $4::bigint = 0 THEN set_config('synchronous_commit', 'off', true) END) AS sc
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()
