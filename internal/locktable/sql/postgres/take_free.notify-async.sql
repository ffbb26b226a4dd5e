-- TakeFree, announced, with Config.AsyncCommit: a claim that expects
-- the key free, on a quiet key, first tries a plain UPDATE of a free
-- row: it costs the server less than the upsert (no proposed row, so
-- one token drawn). A row that is absent, held, or the claimant's
-- already is left to the upsert (take), which queues a refused
-- claimant. A new holder clears the mark and leaves the queue.
UPDATE "sqllock_locks" SET token = sqllock_next_token(), hold_count = 1, acquired_at = now(),
	expires_at = now() + $4 * interval '1 microsecond', owner = $2, host = $3,
	wanted = false, waiters = array_remove(waiters, ROW($5::text, 0, '', '')::sqllock_waiter) FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
WHERE lock_key = $1 AND expires_at <= now() RETURNING token
