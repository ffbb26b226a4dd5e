-- Audit: the lock table's name, operator, reason, key, token. The record
-- of a force release of the live row held under the token, written in
-- the force release's transaction, before it, locking that row.
-- FORCE INDEX (PRIMARY): why, in take_free.sql.
INSERT INTO sqllock_audit (at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason)
SELECT UTC_TIMESTAMP(6), 'force-release', ?, lock_key, token, owner, host, hold_count, ?, ?
FROM `sqllock_locks` FORCE INDEX (PRIMARY) WHERE lock_key = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6) FOR UPDATE
