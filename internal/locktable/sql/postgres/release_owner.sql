UPDATE "sqllock_locks" SET hold_count = hold_count - 1, owner = CASE WHEN hold_count > 1 THEN owner ELSE '' END, expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at END FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc
	WHERE lock_key = $1 AND owner = $2 AND expires_at > now()
