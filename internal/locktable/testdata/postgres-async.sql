-- name: Holder
SELECT token, owner, host FROM "sqllock_locks" WHERE lock_key = $1 AND expires_at > now()

-- name: List
SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	(extract(epoch FROM now() - acquired_at) * 1000000)::bigint
FROM "sqllock_locks" WHERE expires_at > now() ORDER BY lock_key

-- name: Ddl
CREATE TABLE "sqllock_locks" (
    lock_key    varchar(255) NOT NULL PRIMARY KEY,
    owner       varchar(64)  NOT NULL,
    host        varchar(255) NOT NULL,
    hold_count  integer      NOT NULL,
    token       bigint       NOT NULL,
    acquired_at timestamptz  NOT NULL,
    expires_at  timestamptz  NOT NULL,
    wanted      boolean      NOT NULL DEFAULT false,
    waiters     sqllock_waiter[] NOT NULL DEFAULT '{}',
    called      sqllock_waiter
) WITH (fillfactor = 50);

-- name: Live
SELECT lock_key FROM "sqllock_locks" WHERE expires_at > now() AND lock_key IN ($1, $2)

-- name: Take
WITH got AS (
	INSERT INTO "sqllock_locks" AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
	SELECT $1, $2, $3, 1, sqllock_next_token(), now(), now() + $4 * interval '1 microsecond' FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
	ON CONFLICT (lock_key) DO UPDATE SET
		token       = CASE WHEN t.expires_at > now() THEN t.token ELSE sqllock_next_token() END,
		hold_count  = CASE WHEN t.expires_at > now() THEN t.hold_count + 1 ELSE 1 END,
		acquired_at = CASE WHEN t.expires_at > now() THEN t.acquired_at ELSE now() END,
		expires_at  = GREATEST(t.expires_at, EXCLUDED.expires_at),
		owner       = EXCLUDED.owner,
		host        = EXCLUDED.host
	WHERE t.expires_at <= now() OR t.owner = EXCLUDED.owner
	RETURNING t.token, t.hold_count
)
SELECT true, token, hold_count, '', 0::bigint FROM got
UNION ALL
SELECT false, token, hold_count, host, (extract(epoch FROM expires_at - now()) * 1000000)::bigint
FROM "sqllock_locks" WHERE lock_key = $1 AND NOT EXISTS (SELECT 1 FROM got)

-- name: TakeFree
UPDATE "sqllock_locks" SET token = sqllock_next_token(), hold_count = 1, acquired_at = now(),
	expires_at = now() + $4 * interval '1 microsecond', owner = $2, host = $3 FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
WHERE lock_key = $1 AND expires_at <= now() RETURNING token

-- name: Renew
UPDATE "sqllock_locks" SET expires_at = GREATEST(expires_at, now() + $4 * interval '1 microsecond') FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()

-- name: Release
UPDATE "sqllock_locks" SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()

-- name: ReleaseQuiet
UPDATE "sqllock_locks" SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END,
		called     = CASE WHEN hold_count <= 1 THEN NULL ELSE called END FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now() AND NOT wanted AND cardinality(waiters) = 0

-- name: ReleaseOwner
UPDATE "sqllock_locks" SET hold_count = hold_count - 1, owner = CASE WHEN hold_count > 1 THEN owner ELSE '' END, expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at END FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc
	WHERE lock_key = $1 AND owner = $2 AND expires_at > now()

-- name: ForceRelease
UPDATE "sqllock_locks" SET hold_count = 0, owner = '', expires_at = acquired_at FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc
	WHERE lock_key = $1 AND token = $2 AND expires_at > now()

-- name: Leave
UPDATE "sqllock_locks" SET waiters = array_remove(waiters, ROW($2::text, $3::bigint, $4::varchar, $5::varchar)::sqllock_waiter)
	FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
	WHERE lock_key = $1 AND ROW($2::text, $3::bigint, $4::varchar, $5::varchar)::sqllock_waiter = ANY(waiters)

-- name: Audit
INSERT INTO sqllock_audit (at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason)
SELECT now(), 'force-release', $3, lock_key, token, owner, host, hold_count, $4, $5
FROM "sqllock_locks" WHERE lock_key = $1 AND token = $2 AND expires_at > now() FOR UPDATE

-- name: Reap
WITH d AS (
	DELETE FROM "sqllock_locks" WHERE lock_key IN (
		SELECT lock_key FROM "sqllock_locks"
		WHERE expires_at < now() - $1 * interval '1 microsecond'
		LIMIT $2 FOR UPDATE SKIP LOCKED)
	AND expires_at < now() - $1 * interval '1 microsecond'
	RETURNING lock_key, owner
)
SELECT count(*), 0::bigint FROM d

-- name: AuditList
SELECT id, at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason
FROM sqllock_audit ORDER BY id
