-- name: TablelockAcq
INSERT INTO sqllock_locks AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES ($1, $2, 'raw', 1, nextval('sqllock_fence_seq'), now(), now() + interval '30 seconds')
ON CONFLICT (lock_key) DO UPDATE SET token = nextval('sqllock_fence_seq'), hold_count = 1, owner = EXCLUDED.owner,
	acquired_at = now(), expires_at = EXCLUDED.expires_at
WHERE t.expires_at <= now() RETURNING t.token

-- name: TablelockFree
UPDATE sqllock_locks SET token = nextval('sqllock_fence_seq'), hold_count = 1, owner = $2, host = 'raw',
	acquired_at = now(), expires_at = now() + interval '30 seconds'
WHERE lock_key = $1 AND expires_at <= now() RETURNING token

-- name: TablelockRel
UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = now()
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc WHERE lock_key = $1 AND owner = $2 AND token = $3

-- name: RowlockLock
SELECT 1 FROM sqllock_rows WHERE lock_key = $1 FOR UPDATE

-- name: RowlockEnsure
INSERT INTO sqllock_rows (lock_key) VALUES ($1) ON CONFLICT DO NOTHING

-- name: AdvisoryLock
SELECT pg_advisory_lock($1)

-- name: AdvisoryUnlock
SELECT pg_advisory_unlock($1)

-- name: AdvisoryUnlockAll
SELECT pg_advisory_unlock_all()

-- name: AdvisoryLockTx
SELECT pg_advisory_xact_lock($1)

-- name: CASRead
SELECT units, version FROM sqllock_demo_stock WHERE item = $1

-- name: CASWrite
UPDATE sqllock_demo_stock SET units = $1, version = version + 1 WHERE item = $2 AND version = $3
