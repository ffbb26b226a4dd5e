-- name: Schema
CREATE TABLE `sqllock_rows` (
    lock_key varbinary(255) NOT NULL PRIMARY KEY,
    token    bigint         NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- name: Token
SELECT sqllock_next_token()

-- name: LockNoWait
SELECT sqllock_next_token() FROM `sqllock_rows` WHERE lock_key = ? FOR UPDATE NOWAIT

-- name: LockWait
SELECT sqllock_next_token() FROM `sqllock_rows` WHERE lock_key = ? FOR UPDATE

-- name: ShareNoWait
SELECT sqllock_next_token() FROM `sqllock_rows` WHERE lock_key = ? LOCK IN SHARE MODE

-- name: ShareWait
SELECT sqllock_next_token() FROM `sqllock_rows` WHERE lock_key = ? LOCK IN SHARE MODE

-- name: Ensure
INSERT IGNORE INTO `sqllock_rows` (lock_key) VALUES (?)

-- name: SessionQuery
SELECT CONNECTION_ID(), UNIX_TIMESTAMP()

-- name: AliveQuery
SELECT ID, UNIX_TIMESTAMP() FROM information_schema.PROCESSLIST WHERE FIND_IN_SET(ID, ?) > 0

-- name: LockRows
SELECT 1 FROM `orders` WHERE `id` IN (?, ?, ?) ORDER BY `id` FOR UPDATE
