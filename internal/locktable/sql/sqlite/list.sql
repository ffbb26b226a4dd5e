-- List: every live row, by key, with the microseconds since its last
-- hold began. Timestamps are microseconds since the Unix epoch, SQLite's
-- clock read with unixepoch('subsec').
SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	CAST(unixepoch('subsec') * 1000000 AS INTEGER) - acquired_at
FROM `sqllock_locks` WHERE expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER) ORDER BY lock_key
