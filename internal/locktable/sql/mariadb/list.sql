-- List: every live row, by key, with the microseconds since its last
-- hold began.
SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6))
FROM `sqllock_locks` WHERE expires_at > UTC_TIMESTAMP(6) ORDER BY lock_key
