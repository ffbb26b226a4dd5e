-- name: CheckQuery
INSERT INTO "sqllock_fence_tokens" AS f (resource, last_token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET last_token = EXCLUDED.last_token
WHERE f.last_token <= EXCLUDED.last_token

-- name: LastQuery
SELECT last_token FROM "sqllock_fence_tokens" WHERE resource = $1

-- name: Ddl
CREATE TABLE "sqllock_fence_tokens" (
    resource   varchar(255) NOT NULL PRIMARY KEY,
    last_token bigint       NOT NULL
);
