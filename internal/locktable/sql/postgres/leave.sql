-- Leave: a fair waiter that no longer waits takes its entry out of the
-- queue of $1 (key), and so does a Locker none of whose waiters waits
-- for the key any more in the default order (its entry: its id, 0, and
-- an empty owner and host); $2-$5 the entry (caller, claim_us, owner,
-- host). It changes only the queue, so it does not wait for its WAL
-- flush, and writes nothing where the entry is not queued.
UPDATE "sqllock_locks" SET waiters = array_remove(waiters, ROW($2::text, $3::bigint, $4::varchar, $5::varchar)::sqllock_waiter)
	FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc
	WHERE lock_key = $1 AND ROW($2::text, $3::bigint, $4::varchar, $5::varchar)::sqllock_waiter = ANY(waiters)
