UPDATE "sqllock_locks" SET waiters = array_remove(waiters, $2::text) FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
	WHERE lock_key = $1 AND $2::text = ANY(waiters)
