-- Holder: the live holder of ?1 (key): token, owner, host; no row when
-- the key is free.
SELECT token, owner, host FROM `sqllock_locks` WHERE lock_key = ?1 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)
