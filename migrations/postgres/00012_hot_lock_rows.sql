-- +goose Up
-- Takes and releases become HOT updates. Every take and release writes
-- expires_at; while it was indexed no such update could be HOT, so each
-- wrote a new entry into both indexes and left dead ones for vacuum. With
-- only the primary key indexed (lock_key never changes) and room left in
-- each page for the new row version, an update writes the heap page alone.
-- The reaper, the one reader that wanted the index, scans instead: a lock
-- table holds one row per key in use, and a sweep is rare. fillfactor
-- applies to pages written from now on. jobguard's table has the same
-- shape and statements (00007) and follows.
DROP INDEX sqllock_locks_expires_at;
ALTER TABLE sqllock_locks SET (fillfactor = 50);
DROP INDEX sqllock_jobs_expires_at;
ALTER TABLE sqllock_jobs SET (fillfactor = 50);

-- +goose Down
ALTER TABLE sqllock_jobs RESET (fillfactor);
CREATE INDEX sqllock_jobs_expires_at ON sqllock_jobs (expires_at);
ALTER TABLE sqllock_locks RESET (fillfactor);
CREATE INDEX sqllock_locks_expires_at ON sqllock_locks (expires_at);
