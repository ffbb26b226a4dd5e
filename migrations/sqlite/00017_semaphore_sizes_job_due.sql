-- +goose Up
-- What one lock row cannot say, for operators' tools (sqllock locks):
-- how many permits a semaphore's key has, as the last Semaphore to take
-- one of them declared it ("permit 2 of 3"), and when a job next fires,
-- as the schedule of the last replica whose Loop ran it (microseconds
-- since the Unix epoch, as in the lock tables). One row per key or job
-- name, whatever the permit or job table.
CREATE TABLE sqllock_semaphore_sizes (
    sem_key TEXT    NOT NULL PRIMARY KEY,
    permits INTEGER NOT NULL
);

CREATE TABLE sqllock_job_schedule (
    job_name TEXT    NOT NULL PRIMARY KEY,
    next_due INTEGER NOT NULL
);

-- +goose Down
DROP TABLE sqllock_job_schedule;
DROP TABLE sqllock_semaphore_sizes;
