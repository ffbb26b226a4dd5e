-- +goose Up
-- sqllock_jobs takes the lock table's shape, so that one set of statements
-- serves jobs and locks: a job is a lock row kept until its hold-at-least
-- after its run released it. Renamed in place, so rows, tokens and grants
-- stay; hold_count is 1 for a run still holding its job (owner set) and 0
-- for one released.
ALTER TABLE sqllock_jobs RENAME COLUMN name TO lock_key;
ALTER TABLE sqllock_jobs RENAME COLUMN locked_by TO host;
ALTER TABLE sqllock_jobs RENAME COLUMN locked_at TO acquired_at;
ALTER TABLE sqllock_jobs RENAME COLUMN locked_until TO expires_at;
ALTER TABLE sqllock_jobs ADD COLUMN hold_count int NOT NULL DEFAULT 0 AFTER host;
UPDATE sqllock_jobs SET hold_count = 1 WHERE owner <> '';
ALTER TABLE sqllock_jobs ALTER COLUMN hold_count DROP DEFAULT;
ALTER TABLE sqllock_jobs ADD KEY sqllock_jobs_expires_at (expires_at);

-- +goose Down
ALTER TABLE sqllock_jobs DROP KEY sqllock_jobs_expires_at;
ALTER TABLE sqllock_jobs DROP COLUMN hold_count;
ALTER TABLE sqllock_jobs RENAME COLUMN expires_at TO locked_until;
ALTER TABLE sqllock_jobs RENAME COLUMN acquired_at TO locked_at;
ALTER TABLE sqllock_jobs RENAME COLUMN host TO locked_by;
ALTER TABLE sqllock_jobs RENAME COLUMN lock_key TO name;
