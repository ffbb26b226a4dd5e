-- name: Schema
CREATE TABLE `sqllock_rows` (
    lock_key varbinary(255) NOT NULL PRIMARY KEY,
    token    bigint         NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- name: Token
SELECT NEXTVAL(sqllock_fence_seq)

-- name: LockNoWait
SELECT NEXTVAL(sqllock_fence_seq) FROM `sqllock_rows` WHERE lock_key = ? FOR UPDATE NOWAIT

-- name: LockWait
SELECT NEXTVAL(sqllock_fence_seq) FROM `sqllock_rows` WHERE lock_key = ? FOR UPDATE WAIT 5

-- name: ShareNoWait
SELECT NEXTVAL(sqllock_fence_seq) FROM `sqllock_rows` WHERE lock_key = ? LOCK IN SHARE MODE NOWAIT

-- name: ShareWait
SELECT NEXTVAL(sqllock_fence_seq) FROM `sqllock_rows` WHERE lock_key = ? LOCK IN SHARE MODE WAIT 5

-- name: Ensure
SET STATEMENT innodb_lock_wait_timeout = 0 FOR INSERT IGNORE INTO `sqllock_rows` (lock_key) VALUES (?)

-- name: SessionQuery
SELECT CONNECTION_ID(), UNIX_TIMESTAMP() - CAST((SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS
  WHERE VARIABLE_NAME = 'Uptime') AS SIGNED)

-- name: AliveQuery
SELECT ID, UNIX_TIMESTAMP() - CAST((SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS
  WHERE VARIABLE_NAME = 'Uptime') AS SIGNED)
FROM information_schema.PROCESSLIST WHERE FIND_IN_SET(ID, ?) > 0

-- name: LockRows
SELECT 1 FROM `orders` WHERE `id` IN (?, ?, ?) ORDER BY `id` FOR UPDATE
