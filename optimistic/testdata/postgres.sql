-- name: VersionsStampQuery
INSERT INTO "sqllock_versions" AS t (lock_key, version) VALUES ($1, sqllock_next_token())
ON CONFLICT (lock_key) DO UPDATE SET version = sqllock_next_token() RETURNING t.version

-- name: VersionsReleaseQuery
UPDATE "sqllock_versions" SET version = -version WHERE lock_key = $1 AND version = $2

-- name: VersionsReadQuery
SELECT version FROM "sqllock_versions" WHERE lock_key = $1

-- name: CounterTake
UPDATE "sqllock_counters" SET qty = qty - 1 WHERE item = $1 AND stripe = $2 AND qty > 0

-- name: CounterTotal
SELECT COALESCE(SUM(qty), 0) FROM "sqllock_counters" WHERE item = $1

-- name: CounterLeft
SELECT COALESCE(SUM(qty), 0), COUNT(*) FROM "sqllock_counters" WHERE item = $1

-- name: CounterClear
DELETE FROM "sqllock_counters" WHERE item = $1

-- name: CounterInsert
INSERT INTO "sqllock_counters" (item, stripe, qty) VALUES ($1, $2, $3)

-- name: CounterSchema
CREATE TABLE "sqllock_counters" (item varchar(255) NOT NULL, stripe integer NOT NULL, qty bigint NOT NULL, PRIMARY KEY (item, stripe))

-- name: TableUpdate
UPDATE "sqllock_demo_stock" SET "units" = $1, "note" = $2, "version" = "version" + 1 WHERE "item" = $3 AND "version" = $4
