-- Audit: the record of a force release of ?1 (key) held under ?2
-- (token); ?3 the lock table's name, ?4 operator, ?5 reason. It runs in
-- the force release's transaction, before it. No FOR UPDATE: the INSERT
-- takes SQLite's one write lock.
INSERT INTO sqllock_audit (at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason)
SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER), 'force-release', ?3, lock_key, token, owner, host, hold_count, ?4, ?5
FROM `sqllock_locks` WHERE lock_key = ?1 AND token = ?2 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)
