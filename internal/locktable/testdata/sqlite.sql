-- name: Holder
SELECT token, owner, host FROM `sqllock_locks` WHERE lock_key = ?1 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)

-- name: List
SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	CAST(unixepoch('subsec') * 1000000 AS INTEGER) - acquired_at
FROM `sqllock_locks` WHERE expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER) ORDER BY lock_key

-- name: Ddl
CREATE TABLE `sqllock_locks` (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE TRIGGER `sqllock_locks_token_in` AFTER INSERT ON `sqllock_locks` BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
CREATE TRIGGER `sqllock_locks_token_up` AFTER UPDATE OF token ON `sqllock_locks` WHEN NEW.token > OLD.token BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;

-- name: Live
SELECT lock_key FROM `sqllock_locks` WHERE expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER) AND lock_key IN (?1, ?2)

-- name: Take
INSERT INTO `sqllock_locks` AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?1, ?2, ?3, 1, (SELECT value + 1 FROM sqllock_fence WHERE id = 1), CAST(unixepoch('subsec') * 1000000 AS INTEGER), CAST(unixepoch('subsec') * 1000000 AS INTEGER) + ?4)
ON CONFLICT (lock_key) DO UPDATE SET
	token       = CASE WHEN t.expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER) THEN t.token ELSE MAX(excluded.token, t.token + 1) END,
	hold_count  = CASE WHEN t.expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER) THEN t.hold_count + 1 ELSE 1 END,
	acquired_at = CASE WHEN t.expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER) THEN t.acquired_at ELSE excluded.acquired_at END,
	expires_at  = MAX(t.expires_at, excluded.expires_at),
	owner       = excluded.owner,
	host        = excluded.host
WHERE t.expires_at <= CAST(unixepoch('subsec') * 1000000 AS INTEGER) OR t.owner = excluded.owner
RETURNING token, hold_count

-- name: Peek
SELECT owner, token, hold_count, host, expires_at - CAST(unixepoch('subsec') * 1000000 AS INTEGER) FROM `sqllock_locks` WHERE lock_key = ?1

-- name: Fence
UPDATE sqllock_fence SET value = MAX(value, ?1) WHERE id = 1

-- name: Renew
UPDATE `sqllock_locks` SET expires_at = MAX(expires_at, CAST(unixepoch('subsec') * 1000000 AS INTEGER) + ?4)
WHERE lock_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)

-- name: Release
UPDATE `sqllock_locks` SET hold_count = hold_count - 1,
	owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
	expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + ?4 END
WHERE lock_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)

-- name: ReleaseOwner
UPDATE `sqllock_locks` SET hold_count = hold_count - 1,
	owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
	expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at END
WHERE lock_key = ?1 AND owner = ?2 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)

-- name: ForceRelease
UPDATE `sqllock_locks` SET hold_count = 0, owner = '', expires_at = acquired_at
WHERE lock_key = ?1 AND token = ?2 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)

-- name: Audit
INSERT INTO sqllock_audit (at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason)
SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER), 'force-release', ?3, lock_key, token, owner, host, hold_count, ?4, ?5
FROM `sqllock_locks` WHERE lock_key = ?1 AND token = ?2 AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)

-- name: Reap
DELETE FROM `sqllock_locks` WHERE lock_key IN (
	SELECT lock_key FROM `sqllock_locks` WHERE expires_at < CAST(unixepoch('subsec') * 1000000 AS INTEGER) - ?1 LIMIT ?2)

-- name: Triggers
SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ('sqllock_locks_token_in', 'sqllock_locks_token_up')

-- name: AuditList
SELECT id, at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason
FROM sqllock_audit ORDER BY id
