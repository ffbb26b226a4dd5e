-- Renew: ?1 key, ?2 owner, ?3 token, ?4 TTL µs. Extends the holder's live
-- row to TTL from now, never shortening a longer extension.
UPDATE `sqllock_locks` SET expires_at = MAX(expires_at, CAST(unixepoch('subsec') * 1000000 AS INTEGER) + ?4)
WHERE lock_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)
