UPDATE "sqllock_locks" SET expires_at = GREATEST(expires_at, now() + $4 * interval '1 microsecond')
WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()
