-- name: CheckQuery
INSERT INTO `sqllock_fence_tokens` (resource, last_token) VALUES (?1, ?2)
ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token
WHERE last_token <= excluded.last_token

-- name: LastQuery
SELECT last_token FROM `sqllock_fence_tokens` WHERE resource = ?1

-- name: Ddl
CREATE TABLE `sqllock_fence_tokens` (
    resource   TEXT    NOT NULL PRIMARY KEY,
    last_token INTEGER NOT NULL
);
