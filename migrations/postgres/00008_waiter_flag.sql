-- +goose Up
-- wanted: a claim was refused since the holder took the key, so a waiter
-- may sleep on it. The release announces the key (NOTIFY) only then: a
-- transaction that has queued a NOTIFY takes a database-wide lock at
-- commit, which would serialise every release, of any key, behind every
-- other. MySQL and SQLite announce nothing and need no flag. sqllock_jobs
-- has the lock table's shape (00007) and keeps it.
ALTER TABLE sqllock_locks ADD COLUMN wanted boolean NOT NULL DEFAULT false;
ALTER TABLE sqllock_jobs ADD COLUMN wanted boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE sqllock_jobs DROP COLUMN wanted;
ALTER TABLE sqllock_locks DROP COLUMN wanted;
