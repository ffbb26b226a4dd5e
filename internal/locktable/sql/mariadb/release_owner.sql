-- ReleaseOwner: key, owner. Gives one hold of the owner's live row back,
-- whatever its token; the last frees the row at once. Owner and
-- expires_at see hold_count already decremented.
-- FORCE INDEX (PRIMARY): why, in take_free.sql.
UPDATE `sqllock_locks` FORCE INDEX (PRIMARY) SET hold_count = hold_count - 1,
	owner      = IF(hold_count = 0, '', owner),
	expires_at = IF(hold_count = 0, acquired_at, expires_at)
WHERE lock_key = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)
