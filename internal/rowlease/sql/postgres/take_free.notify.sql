UPDATE "sqllock_locks" SET token = sqllock_next_token(), hold_count = 1, acquired_at = now(),
	expires_at = now() + $4 * interval '1 microsecond', owner = $2, host = $3,
	wanted = false, waiters = array_remove(waiters, ROW($5::text, 0, '', '')::sqllock_waiter)
WHERE lock_key = $1 AND expires_at <= now() RETURNING token
