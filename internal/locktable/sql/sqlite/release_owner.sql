-- ReleaseOwner: ?1 key, ?2 owner. Gives one hold of the owner's live
-- row back, whatever its token; the last frees the row at once.
UPDATE `sqllock_locks` SET hold_count = hold_count - 1,
	owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
	expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at END
WHERE lock_key = ?1 AND owner = ?2 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)
