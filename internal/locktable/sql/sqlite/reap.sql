-- Reap: deletes at most ?2 rows expired for longer than ?1 µs. The
-- table has no index on expires_at, so it reads the table through.
DELETE FROM `sqllock_locks` WHERE lock_key IN (
	SELECT lock_key FROM `sqllock_locks` WHERE expires_at < CAST(unixepoch('subsec') * 1000000 AS INTEGER) - ?1 LIMIT ?2)
