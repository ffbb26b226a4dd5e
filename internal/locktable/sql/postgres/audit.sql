INSERT INTO sqllock_audit (at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason)
SELECT now(), 'force-release', $3, lock_key, token, owner, host, hold_count, $4, $5
FROM "sqllock_locks" WHERE lock_key = $1 AND token = $2 AND expires_at > now() FOR UPDATE
