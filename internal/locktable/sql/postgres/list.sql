SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	(extract(epoch FROM now() - acquired_at) * 1000000)::bigint
FROM "sqllock_locks" WHERE expires_at > now() ORDER BY lock_key
