-- +goose Up
-- No index on expires_at. Every take and release writes expires_at, so
-- each also deleted and inserted an entry of that index, and left purge
-- work behind. The reaper, the one reader that wanted it, finds expired
-- rows with a scan instead: a lock table holds one row per key in use, and
-- a sweep is rare. jobguard's table has the same shape and statements
-- (00007) and follows.
ALTER TABLE sqllock_locks DROP KEY sqllock_locks_expires_at;
ALTER TABLE sqllock_jobs DROP KEY sqllock_jobs_expires_at;

-- +goose Down
ALTER TABLE sqllock_jobs ADD KEY sqllock_jobs_expires_at (expires_at);
ALTER TABLE sqllock_locks ADD KEY sqllock_locks_expires_at (expires_at);
