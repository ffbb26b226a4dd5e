-- name: TablelockAcq
INSERT INTO sqllock_locks AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?1, ?2, 'raw', 1, (SELECT value + 1 FROM sqllock_fence WHERE id = 1), CAST(unixepoch('subsec') * 1000000 AS INTEGER), CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 30000000)
ON CONFLICT (lock_key) DO UPDATE SET token = excluded.token, hold_count = 1, owner = excluded.owner,
	acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
WHERE t.expires_at <= CAST(unixepoch('subsec') * 1000000 AS INTEGER) RETURNING token

-- name: TablelockRel
UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) WHERE lock_key = ?1 AND owner = ?2 AND token = ?3

-- name: TablelockFence
UPDATE sqllock_fence SET value = MAX(value, ?1) WHERE id = 1

-- name: CASRead
SELECT units, version FROM sqllock_demo_stock WHERE item = ?

-- name: CASWrite
UPDATE sqllock_demo_stock SET units = ?, version = version + 1 WHERE item = ? AND version = ?
