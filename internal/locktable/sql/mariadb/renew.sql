-- Renew: TTL µs, key, owner, token. Extends the holder's live row to TTL
-- from now, never shortening a longer extension. MariaDB counts changed
-- rows, not matched ones: where it changes none, held says whether the
-- row is still the holder's. FORCE INDEX (PRIMARY): see take_free.
UPDATE `sqllock_locks` FORCE INDEX (PRIMARY) SET expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)
