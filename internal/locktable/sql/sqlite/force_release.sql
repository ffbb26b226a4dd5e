-- ForceRelease: ?1 key, ?2 token. Frees the live row held under the
-- token, every hold.
UPDATE `sqllock_locks` SET hold_count = 0, owner = '', expires_at = acquired_at
WHERE lock_key = ?1 AND token = ?2 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)
