-- Holder: the live holder of the key (?): token, owner, host; no row
-- when the key is free.
SELECT token, owner, host FROM `sqllock_locks` WHERE lock_key = ? AND expires_at > UTC_TIMESTAMP(6)
