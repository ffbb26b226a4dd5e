-- ReapFind: grace µs, batch. Finds at most batch rows expired for longer
-- than grace. With no index on expires_at a DELETE that looked for
-- expired rows would lock every row its scan passed, live keys included,
-- until it committed; a plain read locks nothing.
SELECT lock_key FROM `sqllock_locks` WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND LIMIT ?
