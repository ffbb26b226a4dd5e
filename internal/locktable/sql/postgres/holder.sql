SELECT token, owner, host FROM "sqllock_locks" WHERE lock_key = $1 AND expires_at > now()
