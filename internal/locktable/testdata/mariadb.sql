-- name: Holder
SELECT token, owner, host FROM `sqllock_locks` WHERE lock_key = ? AND expires_at > UTC_TIMESTAMP(6)

-- name: List
SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6))
FROM `sqllock_locks` WHERE expires_at > UTC_TIMESTAMP(6) ORDER BY lock_key

-- name: Ddl
CREATE TABLE `sqllock_locks` (
    lock_key    varbinary(255) NOT NULL PRIMARY KEY,
    owner       varbinary(64)  NOT NULL,
    host        varchar(255)   NOT NULL,
    hold_count  int            NOT NULL,
    token       bigint         NOT NULL,
    acquired_at datetime(6)    NOT NULL,
    expires_at  datetime(6)    NOT NULL
) ENGINE=InnoDB;

-- name: Live
SELECT lock_key FROM `sqllock_locks` WHERE expires_at > UTC_TIMESTAMP(6) AND lock_key IN (?, ?)

-- name: Take
INSERT INTO `sqllock_locks` (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, ?, 1, NEXTVAL(sqllock_fence_seq), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
	token       = IF(expires_at <= UTC_TIMESTAMP(6), NEXTVAL(sqllock_fence_seq), token),
	hold_count  = IF(expires_at <= UTC_TIMESTAMP(6), 1, IF(owner = VALUES(owner), hold_count + 1, hold_count)),
	acquired_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(acquired_at), acquired_at),
	host        = IF(expires_at <= UTC_TIMESTAMP(6) OR owner = VALUES(owner), VALUES(host), host),
	owner       = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
	expires_at  = IF(owner = VALUES(owner), GREATEST(expires_at, VALUES(expires_at)), expires_at)
RETURNING owner, token, hold_count, host, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
	TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6))

-- name: TakeFree
UPDATE `sqllock_locks` FORCE INDEX (PRIMARY) SET token = LAST_INSERT_ID(NEXTVAL(sqllock_fence_seq)),
	hold_count = 1, acquired_at = UTC_TIMESTAMP(6), host = ?, owner = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE lock_key = ? AND expires_at <= UTC_TIMESTAMP(6)

-- name: Renew
UPDATE `sqllock_locks` FORCE INDEX (PRIMARY) SET expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)

-- name: Held
SELECT 1 FROM `sqllock_locks` FORCE INDEX (PRIMARY) WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)

-- name: Release
UPDATE `sqllock_locks` FORCE INDEX (PRIMARY) SET hold_count = hold_count - 1,
	owner      = IF(hold_count = 0, '', owner),
	expires_at = IF(hold_count = 0, acquired_at + INTERVAL ? MICROSECOND, expires_at)
WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)

-- name: ReleaseOwner
UPDATE `sqllock_locks` FORCE INDEX (PRIMARY) SET hold_count = hold_count - 1,
	owner      = IF(hold_count = 0, '', owner),
	expires_at = IF(hold_count = 0, acquired_at, expires_at)
WHERE lock_key = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)

-- name: ForceRelease
UPDATE `sqllock_locks` FORCE INDEX (PRIMARY) SET hold_count = 0, owner = '', expires_at = acquired_at
WHERE lock_key = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)

-- name: Audit
INSERT INTO sqllock_audit (at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason)
SELECT UTC_TIMESTAMP(6), 'force-release', ?, lock_key, token, owner, host, hold_count, ?, ?
FROM `sqllock_locks` FORCE INDEX (PRIMARY) WHERE lock_key = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6) FOR UPDATE

-- name: ReapFind
SELECT lock_key FROM `sqllock_locks` WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND LIMIT ?

-- name: ReapDelete
DELETE FROM `sqllock_locks` WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND lock_key IN (

-- name: GatesArm
SELECT GET_LOCK(?, 0)

-- name: GatesDisarm
DO RELEASE_LOCK(?)

-- name: GatesAll
DO RELEASE_ALL_LOCKS()

-- name: GatesWait
SELECT GET_LOCK(?, ?), RELEASE_LOCK(?)

-- name: GatesLine
SELECT GET_LOCK(?, ?)

-- name: GatesConnID
SELECT CONNECTION_ID()

-- name: GatesKill
KILL CONNECTION %d

-- name: GatesGone
SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?

-- name: AuditList
SELECT id, at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason
FROM sqllock_audit ORDER BY id
