-- Held: key, owner, token; a row where the holder's row is live.
-- FORCE INDEX (PRIMARY): why, in take_free.sql.
SELECT 1 FROM `sqllock_locks` FORCE INDEX (PRIMARY) WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)
