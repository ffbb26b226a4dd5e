-- name: Schema
CREATE TABLE "sqllock_rows" (
    lock_key varchar(255) NOT NULL PRIMARY KEY,
    token    bigint       NOT NULL DEFAULT 0
);

-- name: Token
SELECT sqllock_next_token()

-- name: Lock
INSERT INTO "sqllock_rows" AS r (lock_key, token) VALUES ($1, 0)
ON CONFLICT (lock_key) DO UPDATE SET token = sqllock_next_token()
RETURNING r.token, pg_backend_pid(), pg_current_xact_id()::xid

-- name: Stamp
UPDATE "sqllock_rows" SET token = sqllock_next_token() WHERE lock_key = $1 RETURNING token

-- name: TryLock
UPDATE "sqllock_rows" SET token = sqllock_next_token()
WHERE lock_key = (SELECT lock_key FROM "sqllock_rows" WHERE lock_key = $1 FOR UPDATE NOWAIT)
RETURNING token, pg_backend_pid(), pg_current_xact_id()::xid

-- name: TryInsert
INSERT INTO "sqllock_rows" (lock_key, token) VALUES ($1, 0) ON CONFLICT (lock_key) DO NOTHING RETURNING token

-- name: StampRestore
UPDATE "sqllock_rows" SET token = sqllock_next_token() WHERE lock_key = $1
RETURNING token, pg_backend_pid(), pg_current_xact_id()::xid, set_config('lock_timeout', $2, true)

-- name: Share
SELECT sqllock_next_token(), pg_backend_pid(), pg_current_xact_id()::xid
FROM (SELECT lock_key FROM "sqllock_rows" WHERE lock_key = $1 FOR SHARE) s

-- name: TryShare
SELECT sqllock_next_token(), pg_backend_pid(), pg_current_xact_id()::xid
FROM (SELECT lock_key FROM "sqllock_rows" WHERE lock_key = $1 FOR SHARE NOWAIT) s

-- name: ShareInsert
INSERT INTO "sqllock_rows" (lock_key, token) VALUES ($1, 0) ON CONFLICT (lock_key) DO NOTHING

-- name: TryPrepare
SELECT current_setting('lock_timeout'), set_config('lock_timeout', '10ms', true)

-- name: AliveQuery
SELECT h.i FROM unnest(string_to_array($1, ',')::int[], string_to_array($2, ',')::xid[])
  WITH ORDINALITY AS h(pid, xid, i)
JOIN pg_stat_activity a ON a.pid = h.pid AND a.backend_xid = h.xid

-- name: GoneQuery
SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(string_to_array($1, ',')::int[])

-- name: LockRows
SELECT 1 FROM "orders" WHERE "id" IN ($1, $2, $3) ORDER BY "id" FOR UPDATE
