-- name: CheckQuery
INSERT INTO `sqllock_fence_tokens` (resource, last_token) VALUES (?, ?)
ON DUPLICATE KEY UPDATE last_token = GREATEST(last_token, VALUES(last_token))

-- name: LastQuery
SELECT last_token FROM `sqllock_fence_tokens` WHERE resource = ?

-- name: LockedQuery
SELECT last_token FROM `sqllock_fence_tokens` WHERE resource = ? FOR UPDATE

-- name: Ddl
CREATE TABLE `sqllock_fence_tokens` (
    resource   varbinary(255) NOT NULL PRIMARY KEY,
    last_token bigint         NOT NULL
) ENGINE=InnoDB;
