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
	SELECT $1::varchar, $2::varchar, $3::varchar, 1, sqllock_next_token(), now(), now() + $4 * interval '1 microsecond'
	WHERE NOT EXISTS (SELECT 1 FROM "sqllock_locks" AS w
		WHERE w.lock_key = $1::varchar AND w.expires_at > now() AND w.owner <> $2::varchar
		AND (w.wanted OR ($5::text <> '' AND ROW($5::text, $6::bigint, $2::varchar, $3::varchar)::sqllock_waiter = ANY(w.waiters))))
	ON CONFLICT (lock_key) DO UPDATE SET
		token       = CASE WHEN t.expires_at <= now() THEN sqllock_next_token() ELSE t.token END,
		hold_count  = CASE WHEN t.expires_at <= now() THEN 1
			WHEN $7::bigint >= 0 AND t.owner = EXCLUDED.owner AND t.token > $7::bigint AND t.expires_at > now()
				AND t.called = ROW($5::text, $6::bigint, $2::varchar, $3::varchar)::sqllock_waiter THEN t.hold_count
			WHEN t.owner = EXCLUDED.owner THEN t.hold_count + 1
			ELSE t.hold_count END,
		acquired_at = CASE WHEN t.expires_at <= now() THEN now() ELSE t.acquired_at END,
		expires_at  = CASE WHEN t.expires_at <= now() OR t.owner = EXCLUDED.owner THEN GREATEST(t.expires_at, EXCLUDED.expires_at) ELSE t.expires_at END,
		owner       = CASE WHEN t.expires_at <= now() OR t.owner = EXCLUDED.owner THEN EXCLUDED.owner ELSE t.owner END,
		host        = CASE WHEN t.expires_at <= now() OR t.owner = EXCLUDED.owner THEN EXCLUDED.host ELSE t.host END,
		wanted      = CASE WHEN t.expires_at <= now() THEN false
			WHEN t.owner = EXCLUDED.owner THEN t.wanted
			WHEN $5::text <> '' AND cardinality(t.waiters) < 64 THEN t.wanted
			ELSE true END,
		waiters     = CASE WHEN t.expires_at <= now() OR t.owner = EXCLUDED.owner
				THEN array_remove(t.waiters, ROW($5::text, $6::bigint, $2::varchar, $3::varchar)::sqllock_waiter)
			WHEN $5::text <> '' AND cardinality(t.waiters) < 64
				AND NOT ROW($5::text, $6::bigint, $2::varchar, $3::varchar)::sqllock_waiter = ANY(t.waiters)
				THEN t.waiters || ROW($5::text, $6::bigint, $2::varchar, $3::varchar)::sqllock_waiter
			ELSE t.waiters END,
		called      = CASE WHEN t.expires_at <= now()
				OR ($7::bigint >= 0 AND t.owner = EXCLUDED.owner AND t.token > $7::bigint AND t.expires_at > now()
					AND t.called = ROW($5::text, $6::bigint, $2::varchar, $3::varchar)::sqllock_waiter) THEN NULL
			ELSE t.called END
	WHERE CASE WHEN t.expires_at <= now() OR t.owner = EXCLUDED.owner THEN true
		ELSE set_config('synchronous_commit', 'off', true) = 'off'
			AND NOT (t.wanted OR ($5::text <> '' AND ROW($5::text, $6::bigint, $2::varchar, $3::varchar)::sqllock_waiter = ANY(t.waiters))) END
	RETURNING t.owner = $2 AS won, t.token, t.hold_count, t.host, t.expires_at,
		ROW($5::text, $6::bigint, $2::varchar, $3::varchar)::sqllock_waiter = ANY(t.waiters) AS queued
)
SELECT won, token, hold_count, CASE WHEN won THEN '' ELSE host END,
	CASE WHEN won THEN 0::bigint ELSE (extract(epoch FROM expires_at - now()) * 1000000)::bigint END, queued FROM got
UNION ALL
SELECT false, token, hold_count, host, (extract(epoch FROM expires_at - now()) * 1000000)::bigint,
	ROW($5::text, $6::bigint, $2::varchar, $3::varchar)::sqllock_waiter = ANY(waiters)
FROM "sqllock_locks" WHERE lock_key = $1 AND NOT EXISTS (SELECT 1 FROM got)

-- name: TakeFree
UPDATE "sqllock_locks" SET token = sqllock_next_token(), hold_count = 1, acquired_at = now(),
	expires_at = now() + $4 * interval '1 microsecond', owner = $2, host = $3,
	wanted = false, waiters = array_remove(waiters, ROW($5::text, $6::bigint, $2::varchar, $3::varchar)::sqllock_waiter), called = NULL
WHERE lock_key = $1 AND expires_at <= now() RETURNING token

-- name: Renew
UPDATE "sqllock_locks" SET expires_at = GREATEST(expires_at, now() + $4 * interval '1 microsecond')
WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()

-- name: Release
WITH r AS (
	UPDATE "sqllock_locks" SET
		hold_count  = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN 1 ELSE hold_count - 1 END,
		owner       = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN (waiters[1]).owner WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at  = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN now() + (waiters[1]).claim_us * interval '1 microsecond'
			WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END,
		host        = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN (waiters[1]).host ELSE host END,
		token       = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN sqllock_next_token() ELSE token END,
		acquired_at = CASE WHEN hold_count <= 1 AND acquired_at + $4 * interval '1 microsecond' <= now() AND (waiters[1]).claim_us > 0 THEN now() ELSE acquired_at END,
		called      = CASE WHEN hold_count <= 1 AND (cardinality(waiters) = 0 OR (waiters[1]).claim_us = 0 OR acquired_at + $4 * interval '1 microsecond' <= now()) THEN waiters[1] WHEN hold_count <= 1 THEN NULL ELSE called END,
		waiters     = CASE WHEN hold_count <= 1 AND (cardinality(waiters) = 0 OR (waiters[1]).claim_us = 0 OR acquired_at + $4 * interval '1 microsecond' <= now()) THEN waiters[2:] ELSE waiters END
	FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after,
		acquired_at = now() AND (called).claim_us > 0 AS granted,
		set_config('synchronous_commit', CASE WHEN $4::bigint <> 0 OR (acquired_at = now() AND (called).claim_us > 0) THEN sc.sc0 ELSE 'off' END, true)
)
SELECT CASE WHEN granted THEN set_config('sqllock.calls', json_build_object('key', lock_key, 'released', $3::bigint,
			'channels', array_remove(ARRAY[$6 || (called).caller,
				CASE WHEN (next).caller <> (called).caller THEN $6 || (next).caller END,
				CASE WHEN (after).caller <> (called).caller THEN $6 || (after).caller END], NULL),
			'payload', 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text, false)
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify($5, lock_key)::text
	WHEN (called).caller IS NOT NULL THEN pg_notify($6 || (called).caller, (called).caller || lock_key)::text
		|| CASE WHEN (next).caller IS NOT NULL THEN pg_notify($6 || (next).caller, (called).caller || lock_key)::text ELSE '' END
		|| CASE WHEN (after).caller IS NOT NULL THEN pg_notify($6 || (after).caller, (called).caller || lock_key)::text ELSE '' END END FROM r

-- name: ReleaseQuiet
UPDATE "sqllock_locks" SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END,
		called     = CASE WHEN hold_count <= 1 THEN NULL ELSE called END FROM (SELECT CASE WHEN $4::bigint = 0 THEN set_config('synchronous_commit', 'off', true) END) AS sc
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now() AND NOT wanted AND cardinality(waiters) = 0

-- name: ReleaseOwner
WITH r AS (
	UPDATE "sqllock_locks" SET
		hold_count  = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN 1 ELSE hold_count - 1 END,
		owner       = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN (waiters[1]).owner WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at  = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN now() + (waiters[1]).claim_us * interval '1 microsecond'
			WHEN hold_count > 1 THEN expires_at ELSE acquired_at END,
		host        = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN (waiters[1]).host ELSE host END,
		token       = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN sqllock_next_token() ELSE token END,
		acquired_at = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN now() ELSE acquired_at END,
		called      = CASE WHEN hold_count <= 1 THEN waiters[1] WHEN hold_count <= 1 THEN NULL ELSE called END,
		waiters     = CASE WHEN hold_count <= 1 THEN waiters[2:] ELSE waiters END
	WHERE lock_key = $1 AND owner = $2 AND expires_at > now()
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after,
		acquired_at = now() AND (called).claim_us > 0 AS granted
)
SELECT CASE WHEN granted THEN pg_notify($4 || (called).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text
		|| CASE WHEN (next).caller <> (called).caller THEN pg_notify($4 || (next).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text ELSE '' END
		|| CASE WHEN (after).caller <> (called).caller THEN pg_notify($4 || (after).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text ELSE '' END
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify($3, lock_key)::text
	WHEN (called).caller IS NOT NULL THEN pg_notify($4 || (called).caller, (called).caller || lock_key)::text
		|| CASE WHEN (next).caller IS NOT NULL THEN pg_notify($4 || (next).caller, (called).caller || lock_key)::text ELSE '' END
		|| CASE WHEN (after).caller IS NOT NULL THEN pg_notify($4 || (after).caller, (called).caller || lock_key)::text ELSE '' END END FROM r

-- name: ForceRelease
WITH r AS (
	UPDATE "sqllock_locks" SET
		hold_count  = CASE WHEN (waiters[1]).claim_us > 0 THEN 1 ELSE 0 END,
		owner       = CASE WHEN (waiters[1]).claim_us > 0 THEN (waiters[1]).owner ELSE '' END,
		expires_at  = CASE WHEN (waiters[1]).claim_us > 0 THEN now() + (waiters[1]).claim_us * interval '1 microsecond'
			ELSE acquired_at END,
		host        = CASE WHEN (waiters[1]).claim_us > 0 THEN (waiters[1]).host ELSE host END,
		token       = CASE WHEN (waiters[1]).claim_us > 0 THEN sqllock_next_token() ELSE token END,
		acquired_at = CASE WHEN (waiters[1]).claim_us > 0 THEN now() ELSE acquired_at END,
		called      = waiters[1],
		waiters     = waiters[2:]
	WHERE lock_key = $1 AND token = $2 AND expires_at > now()
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after,
		acquired_at = now() AND (called).claim_us > 0 AS granted
)
SELECT CASE WHEN granted THEN pg_notify($4 || (called).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text
		|| CASE WHEN (next).caller <> (called).caller THEN pg_notify($4 || (next).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text ELSE '' END
		|| CASE WHEN (after).caller <> (called).caller THEN pg_notify($4 || (after).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text ELSE '' END
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify($3, lock_key)::text
	WHEN (called).caller IS NOT NULL THEN pg_notify($4 || (called).caller, (called).caller || lock_key)::text
		|| CASE WHEN (next).caller IS NOT NULL THEN pg_notify($4 || (next).caller, (called).caller || lock_key)::text ELSE '' END
		|| CASE WHEN (after).caller IS NOT NULL THEN pg_notify($4 || (after).caller, (called).caller || lock_key)::text ELSE '' END END FROM r

-- name: Void
WITH r AS (
	UPDATE "sqllock_locks" SET
		hold_count  = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN 1 ELSE hold_count - 1 END,
		owner       = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN (waiters[1]).owner WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at  = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN now() + (waiters[1]).claim_us * interval '1 microsecond'
			WHEN hold_count > 1 THEN expires_at ELSE acquired_at END,
		host        = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN (waiters[1]).host ELSE host END,
		token       = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN sqllock_next_token() ELSE token END,
		acquired_at = CASE WHEN hold_count <= 1 AND (waiters[1]).claim_us > 0 THEN now() ELSE acquired_at END,
		called      = CASE WHEN hold_count <= 1 THEN waiters[1] WHEN hold_count <= 1 THEN NULL ELSE called END,
		waiters     = CASE WHEN hold_count <= 1 THEN waiters[2:] ELSE waiters END
	WHERE lock_key = $1 AND owner = $2 AND called = ROW($5::text, $6::bigint, $7::varchar, $8::varchar)::sqllock_waiter
		AND (token = $3 OR ($3::bigint = 0 AND token > $4::bigint)) AND expires_at > now()
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after,
		acquired_at = now() AND (called).claim_us > 0 AS granted
)
SELECT CASE WHEN granted THEN pg_notify($10 || (called).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text
		|| CASE WHEN (next).caller <> (called).caller THEN pg_notify($10 || (next).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text ELSE '' END
		|| CASE WHEN (after).caller <> (called).caller THEN pg_notify($10 || (after).caller, 'g' || json_build_object('token', token, 'entry', called, 'key', lock_key)::text)::text ELSE '' END
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify($9, lock_key)::text
	WHEN (called).caller IS NOT NULL THEN pg_notify($10 || (called).caller, (called).caller || lock_key)::text
		|| CASE WHEN (next).caller IS NOT NULL THEN pg_notify($10 || (next).caller, (called).caller || lock_key)::text ELSE '' END
		|| CASE WHEN (after).caller IS NOT NULL THEN pg_notify($10 || (after).caller, (called).caller || lock_key)::text ELSE '' END END FROM r

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
SELECT count(*), count(pg_notify($3, lock_key)) FILTER (WHERE owner <> '') FROM d

-- name: NotifyGrant
SELECT CASE WHEN s.calls ->> 'key' = $1 AND (s.calls ->> 'released')::bigint = $2::bigint
		THEN (SELECT count(pg_notify(c, s.calls ->> 'payload')) FROM json_array_elements_text(s.calls -> 'channels') AS c)
		ELSE 0 END
	FROM (SELECT nullif(current_setting('sqllock.calls', true), '')::json AS calls,
			set_config('sqllock.calls', '', false) AS cleared,
			set_config('synchronous_commit', 'off', true) AS sc
		OFFSET 0) AS s

-- name: AuditList
SELECT id, at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason
FROM sqllock_audit ORDER BY id
