-- Release: keep µs, key, owner, token (keep: jobguard's hold-at-least: a
-- freed row expires when its last hold began plus keep). The holder gives
-- one hold back; the last frees the row. Single-table UPDATE assigns left
-- to right: owner and expires_at see hold_count already decremented.
-- FORCE INDEX (PRIMARY): why, in take_free.sql.
UPDATE `sqllock_locks` FORCE INDEX (PRIMARY) SET hold_count = hold_count - 1,
	owner      = IF(hold_count = 0, '', owner),
	expires_at = IF(hold_count = 0, acquired_at + INTERVAL ? MICROSECOND, expires_at)
WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)
