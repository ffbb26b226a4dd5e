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
    waiters     text[]       NOT NULL DEFAULT '{}',
    called      text         NOT NULL DEFAULT ''
) WITH (fillfactor = 50);

-- name: Live
SELECT lock_key FROM "sqllock_locks" WHERE expires_at > now() AND lock_key IN ($1, $2)

-- name: Take
WITH got AS (
	INSERT INTO "sqllock_locks" AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
	SELECT $1::varchar, $2::varchar, $3::varchar, 1, sqllock_next_token(), now(), now() + $4 * interval '1 microsecond'
	WHERE NOT EXISTS (SELECT 1 FROM "sqllock_locks" AS w
		WHERE w.lock_key = $1::varchar AND (w.wanted OR ($5::text <> '' AND $5::text = ANY(w.waiters))) AND w.expires_at > now() AND w.owner <> $2::varchar)
	ON CONFLICT (lock_key) DO UPDATE SET
		token       = CASE WHEN t.expires_at <= now() THEN sqllock_next_token() ELSE t.token END,
		hold_count  = CASE WHEN t.expires_at <= now() THEN 1 WHEN ($6::bigint >= 0 AND t.owner = EXCLUDED.owner AND t.called = $5::text AND t.token > $6::bigint AND t.expires_at > now()) THEN t.hold_count WHEN t.owner = EXCLUDED.owner THEN t.hold_count + 1 ELSE t.hold_count END,
		acquired_at = CASE WHEN t.expires_at <= now() THEN now() ELSE t.acquired_at END,
		expires_at  = CASE WHEN (t.expires_at <= now() OR t.owner = EXCLUDED.owner) THEN GREATEST(t.expires_at, EXCLUDED.expires_at) ELSE t.expires_at END,
		owner       = CASE WHEN (t.expires_at <= now() OR t.owner = EXCLUDED.owner) THEN EXCLUDED.owner ELSE t.owner END,
		host        = CASE WHEN (t.expires_at <= now() OR t.owner = EXCLUDED.owner) THEN EXCLUDED.host ELSE t.host END,
		wanted      = CASE WHEN t.expires_at <= now() THEN false WHEN t.owner = EXCLUDED.owner THEN t.wanted
			WHEN ($5::text <> '' AND cardinality(t.waiters) < 64) THEN t.wanted ELSE true END,
		waiters     = CASE WHEN (t.expires_at <= now() OR t.owner = EXCLUDED.owner) THEN array_remove(t.waiters, $5::text)
			WHEN ($5::text <> '' AND cardinality(t.waiters) < 64) AND NOT $5::text = ANY(t.waiters) THEN t.waiters || $5::text ELSE t.waiters END,
		called      = CASE WHEN t.expires_at <= now() OR ($6::bigint >= 0 AND t.owner = EXCLUDED.owner AND t.called = $5::text AND t.token > $6::bigint AND t.expires_at > now()) THEN '' ELSE t.called END
	WHERE CASE WHEN (t.expires_at <= now() OR t.owner = EXCLUDED.owner) THEN true
		ELSE set_config('synchronous_commit', 'off', true) = 'off' AND NOT (t.wanted OR ($5::text <> '' AND $5::text = ANY(t.waiters))) END
	RETURNING t.owner = $2 AS won, t.token, t.hold_count, t.host, t.expires_at, $5::text = ANY(t.waiters) AS queued
)
SELECT won, token, hold_count, CASE WHEN won THEN '' ELSE host END,
	CASE WHEN won THEN 0::bigint ELSE (extract(epoch FROM expires_at - now()) * 1000000)::bigint END, queued FROM got
UNION ALL
SELECT false, token, hold_count, host, (extract(epoch FROM expires_at - now()) * 1000000)::bigint, $5::text = ANY(waiters)
FROM "sqllock_locks" WHERE lock_key = $1 AND NOT EXISTS (SELECT 1 FROM got)

-- name: TakeFree
UPDATE "sqllock_locks" SET token = sqllock_next_token(), hold_count = 1, acquired_at = now(),
	expires_at = now() + $4 * interval '1 microsecond', owner = $2, host = $3, wanted = false, waiters = array_remove(waiters, $5::text), called = ''
WHERE lock_key = $1 AND expires_at <= now() RETURNING token

-- name: Renew
UPDATE "sqllock_locks" SET expires_at = GREATEST(expires_at, now() + $4 * interval '1 microsecond')
WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()

-- name: Release
WITH r AS (
	UPDATE "sqllock_locks" SET hold_count = CASE WHEN (hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND length(waiters[1]) > 16) THEN 1 ELSE hold_count - 1 END,
		owner       = CASE WHEN (hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND length(waiters[1]) > 16) THEN substr(waiters[1], 37, substr(waiters[1], 32, 2)::int) ELSE CASE WHEN hold_count > 1 THEN owner ELSE '' END END,
		expires_at  = CASE WHEN (hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND length(waiters[1]) > 16) THEN now() + substr(waiters[1], 17, 15)::bigint * interval '1 microsecond' ELSE CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END END,
		host        = CASE WHEN (hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND length(waiters[1]) > 16) THEN substr(waiters[1], 37 + substr(waiters[1], 32, 2)::int, substr(waiters[1], 34, 3)::int) ELSE host END,
		token       = CASE WHEN (hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND length(waiters[1]) > 16) THEN sqllock_next_token() ELSE token END,
		acquired_at = CASE WHEN (hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND length(waiters[1]) > 16) THEN now() ELSE acquired_at END,
		called      = CASE WHEN (hold_count <= 1 AND (waiters[1] IS NULL OR NOT length(waiters[1]) > 16 OR acquired_at + $4 * interval '1 microsecond' <= now())) THEN COALESCE(waiters[1], '') WHEN hold_count <= 1 THEN '' ELSE called END,
		waiters     = CASE WHEN (hold_count <= 1 AND (waiters[1] IS NULL OR NOT length(waiters[1]) > 16 OR acquired_at + $4 * interval '1 microsecond' <= now())) THEN waiters[2:] ELSE waiters END FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after, (acquired_at = now() AND length(called) > 16) AS granted,
		set_config('synchronous_commit', CASE WHEN ($4::bigint <> 0) OR (acquired_at = now() AND length(called) > 16) THEN sc.sc0 ELSE 'off' END, true)
)
SELECT CASE WHEN granted THEN pg_notify($6 || left(called, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify($6 || left(next, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify($6 || left(after, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text ELSE '' END
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify($5, lock_key)::text
	WHEN called <> '' THEN pg_notify($6 || called, called || lock_key)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify($6 || left(next, 16), called || lock_key)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify($6 || left(after, 16), called || lock_key)::text ELSE '' END END FROM r

-- name: ReleaseQuiet
UPDATE "sqllock_locks" SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END,
		called     = CASE WHEN hold_count <= 1 THEN '' ELSE called END FROM (SELECT CASE WHEN $4::bigint = 0 THEN set_config('synchronous_commit', 'off', true) END) AS sc
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now() AND NOT wanted AND cardinality(waiters) = 0

-- name: ReleaseOwner
WITH r AS (
	UPDATE "sqllock_locks" SET hold_count = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN 1 ELSE hold_count - 1 END,
		owner       = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN substr(waiters[1], 37, substr(waiters[1], 32, 2)::int) ELSE CASE WHEN hold_count > 1 THEN owner ELSE '' END END,
		expires_at  = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN now() + substr(waiters[1], 17, 15)::bigint * interval '1 microsecond' ELSE CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at END END,
		host        = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN substr(waiters[1], 37 + substr(waiters[1], 32, 2)::int, substr(waiters[1], 34, 3)::int) ELSE host END,
		token       = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN sqllock_next_token() ELSE token END,
		acquired_at = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN now() ELSE acquired_at END,
		called      = CASE WHEN (hold_count <= 1 AND (waiters[1] IS NULL OR NOT length(waiters[1]) > 16 OR true)) THEN COALESCE(waiters[1], '') WHEN hold_count <= 1 THEN '' ELSE called END,
		waiters     = CASE WHEN (hold_count <= 1 AND (waiters[1] IS NULL OR NOT length(waiters[1]) > 16 OR true)) THEN waiters[2:] ELSE waiters END FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc
	WHERE lock_key = $1 AND owner = $2 AND expires_at > now()
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after, (acquired_at = now() AND length(called) > 16) AS granted,
		set_config('synchronous_commit', CASE WHEN (true) OR (acquired_at = now() AND length(called) > 16) THEN sc.sc0 ELSE 'off' END, true)
)
SELECT CASE WHEN granted THEN pg_notify($4 || left(called, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify($4 || left(next, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify($4 || left(after, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text ELSE '' END
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify($3, lock_key)::text
	WHEN called <> '' THEN pg_notify($4 || called, called || lock_key)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify($4 || left(next, 16), called || lock_key)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify($4 || left(after, 16), called || lock_key)::text ELSE '' END END FROM r

-- name: ForceRelease
WITH r AS (
	UPDATE "sqllock_locks" SET hold_count = CASE WHEN (true AND true AND length(waiters[1]) > 16) THEN 1 ELSE 0 END,
		owner       = CASE WHEN (true AND true AND length(waiters[1]) > 16) THEN substr(waiters[1], 37, substr(waiters[1], 32, 2)::int) ELSE '' END,
		expires_at  = CASE WHEN (true AND true AND length(waiters[1]) > 16) THEN now() + substr(waiters[1], 17, 15)::bigint * interval '1 microsecond' ELSE acquired_at END,
		host        = CASE WHEN (true AND true AND length(waiters[1]) > 16) THEN substr(waiters[1], 37 + substr(waiters[1], 32, 2)::int, substr(waiters[1], 34, 3)::int) ELSE host END,
		token       = CASE WHEN (true AND true AND length(waiters[1]) > 16) THEN sqllock_next_token() ELSE token END,
		acquired_at = CASE WHEN (true AND true AND length(waiters[1]) > 16) THEN now() ELSE acquired_at END,
		called      = CASE WHEN (true AND (waiters[1] IS NULL OR NOT length(waiters[1]) > 16 OR true)) THEN COALESCE(waiters[1], '') WHEN true THEN '' ELSE called END,
		waiters     = CASE WHEN (true AND (waiters[1] IS NULL OR NOT length(waiters[1]) > 16 OR true)) THEN waiters[2:] ELSE waiters END FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc
	WHERE lock_key = $1 AND token = $2 AND expires_at > now()
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after, (acquired_at = now() AND length(called) > 16) AS granted,
		set_config('synchronous_commit', CASE WHEN (true) OR (acquired_at = now() AND length(called) > 16) THEN sc.sc0 ELSE 'off' END, true)
)
SELECT CASE WHEN granted THEN pg_notify($4 || left(called, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify($4 || left(next, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify($4 || left(after, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text ELSE '' END
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify($3, lock_key)::text
	WHEN called <> '' THEN pg_notify($4 || called, called || lock_key)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify($4 || left(next, 16), called || lock_key)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify($4 || left(after, 16), called || lock_key)::text ELSE '' END END FROM r

-- name: Void
WITH r AS (
	UPDATE "sqllock_locks" SET hold_count = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN 1 ELSE hold_count - 1 END,
		owner       = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN substr(waiters[1], 37, substr(waiters[1], 32, 2)::int) ELSE CASE WHEN hold_count > 1 THEN owner ELSE '' END END,
		expires_at  = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN now() + substr(waiters[1], 17, 15)::bigint * interval '1 microsecond' ELSE CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at END END,
		host        = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN substr(waiters[1], 37 + substr(waiters[1], 32, 2)::int, substr(waiters[1], 34, 3)::int) ELSE host END,
		token       = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN sqllock_next_token() ELSE token END,
		acquired_at = CASE WHEN (hold_count <= 1 AND true AND length(waiters[1]) > 16) THEN now() ELSE acquired_at END,
		called      = CASE WHEN (hold_count <= 1 AND (waiters[1] IS NULL OR NOT length(waiters[1]) > 16 OR true)) THEN COALESCE(waiters[1], '') WHEN hold_count <= 1 THEN '' ELSE called END,
		waiters     = CASE WHEN (hold_count <= 1 AND (waiters[1] IS NULL OR NOT length(waiters[1]) > 16 OR true)) THEN waiters[2:] ELSE waiters END FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc
	WHERE lock_key = $1 AND owner = $2 AND called = $3 AND (token = $4 OR ($4::bigint = 0 AND token > $5::bigint)) AND expires_at > now()
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after, (acquired_at = now() AND length(called) > 16) AS granted,
		set_config('synchronous_commit', CASE WHEN (true) OR (acquired_at = now() AND length(called) > 16) THEN sc.sc0 ELSE 'off' END, true)
)
SELECT CASE WHEN granted THEN pg_notify($7 || left(called, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify($7 || left(next, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify($7 || left(after, 16), 'g' || lpad(token::text, 20, '0') || called || lock_key)::text ELSE '' END
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify($6, lock_key)::text
	WHEN called <> '' THEN pg_notify($7 || called, called || lock_key)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify($7 || left(next, 16), called || lock_key)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify($7 || left(after, 16), called || lock_key)::text ELSE '' END END FROM r

-- name: Leave
UPDATE "sqllock_locks" SET waiters = array_remove(waiters, $2::text) FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
	WHERE lock_key = $1 AND $2::text = ANY(waiters)

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
SELECT count(*), count(pg_notify($3, lock_key)) FILTER (WHERE owner <> '') FROM d

-- name: AuditList
SELECT id, at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason
FROM sqllock_audit ORDER BY id
