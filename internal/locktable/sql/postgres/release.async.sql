UPDATE "sqllock_locks" SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()
