UPDATE "sqllock_locks" SET hold_count = 0, owner = '', expires_at = acquired_at FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc
	WHERE lock_key = $1 AND token = $2 AND expires_at > now()
