-- name: TablelockAcq
INSERT INTO sqllock_locks (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, 'raw', 1, LAST_INSERT_ID(sqllock_next_token()), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)
ON DUPLICATE KEY UPDATE token = IF(expires_at <= UTC_TIMESTAMP(6), LAST_INSERT_ID(sqllock_next_token()), token + LAST_INSERT_ID(0)),
	owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
	expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)

-- name: TablelockRel
UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = UTC_TIMESTAMP(6) WHERE lock_key = ? AND owner = ? AND token = ?

-- name: RowlockLock
SELECT 1 FROM sqllock_rows WHERE lock_key = ? FOR UPDATE

-- name: RowlockEnsure
INSERT IGNORE INTO sqllock_rows (lock_key) VALUES (?)

-- name: AdvisoryLock
SELECT GET_LOCK(?, 60)

-- name: AdvisoryUnlock
SELECT RELEASE_LOCK(?)

-- name: AdvisoryUnlockAll
SELECT RELEASE_ALL_LOCKS()

-- name: CASRead
SELECT units, version FROM sqllock_demo_stock WHERE item = ?

-- name: CASWrite
UPDATE sqllock_demo_stock SET units = ?, version = version + 1 WHERE item = ? AND version = ?
