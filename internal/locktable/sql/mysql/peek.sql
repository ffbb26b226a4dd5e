-- Peek, on the MySQL path: the live row of the key after a take that did
-- not insert it: token, owner, hold_count, host, µs left. No row where
-- the key is free.
SELECT token, owner, hold_count, host, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM `sqllock_locks`
WHERE lock_key = ? AND expires_at > UTC_TIMESTAMP(6)
