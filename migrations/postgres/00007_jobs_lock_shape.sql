-- +goose Up
-- sqllock_jobs takes the lock table's shape, so that one set of statements
-- serves jobs and locks: a job is a lock row kept until its hold-at-least
-- after its run released it. Renamed in place, so rows, tokens, grants and
-- views stay; hold_count is 1 for a run still holding its job (owner set)
-- and 0 for one released. PostgreSQL adds the column last, where the lock
-- table has it fourth: statements name their columns, so it does not matter.
ALTER TABLE sqllock_jobs RENAME COLUMN name TO lock_key;
ALTER TABLE sqllock_jobs RENAME COLUMN locked_by TO host;
ALTER TABLE sqllock_jobs RENAME COLUMN locked_at TO acquired_at;
ALTER TABLE sqllock_jobs RENAME COLUMN locked_until TO expires_at;
ALTER TABLE sqllock_jobs ADD COLUMN hold_count integer NOT NULL DEFAULT 0;
UPDATE sqllock_jobs SET hold_count = 1 WHERE owner <> '';
ALTER TABLE sqllock_jobs ALTER COLUMN hold_count DROP DEFAULT;
CREATE INDEX sqllock_jobs_expires_at ON sqllock_jobs (expires_at);

-- +goose Down
DROP INDEX sqllock_jobs_expires_at;
ALTER TABLE sqllock_jobs DROP COLUMN hold_count;
ALTER TABLE sqllock_jobs RENAME COLUMN expires_at TO locked_until;
ALTER TABLE sqllock_jobs RENAME COLUMN acquired_at TO locked_at;
ALTER TABLE sqllock_jobs RENAME COLUMN host TO locked_by;
ALTER TABLE sqllock_jobs RENAME COLUMN lock_key TO name;
