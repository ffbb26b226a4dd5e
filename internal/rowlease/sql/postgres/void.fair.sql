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
