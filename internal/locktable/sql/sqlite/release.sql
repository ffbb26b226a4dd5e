-- Release: ?1 key, ?2 owner, ?3 token, ?4 keep µs (jobguard's
-- hold-at-least: a freed row expires when its last hold began plus
-- keep). The holder gives one hold back; the last frees the row.
UPDATE `sqllock_locks` SET hold_count = hold_count - 1,
	owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
	expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + ?4 END
WHERE lock_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)
