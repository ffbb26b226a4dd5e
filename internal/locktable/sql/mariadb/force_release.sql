-- ForceRelease: key, token. Frees the live row held under the token,
-- every hold.
-- FORCE INDEX (PRIMARY): why, in take_free.sql.
UPDATE `sqllock_locks` FORCE INDEX (PRIMARY) SET hold_count = 0, owner = '', expires_at = acquired_at
WHERE lock_key = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)
