-- +goose Up
-- What one lock row cannot say, for operators' tools (sqllock locks):
-- how many permits a semaphore's key has, as the last Semaphore to take
-- one of them declared it ("permit 2 of 3"), and when a job next fires,
-- as the schedule of the last replica whose Loop ran it. One row per key
-- or job name, whatever the permit or job table.
CREATE TABLE sqllock_semaphore_sizes (
    sem_key varchar(255) NOT NULL PRIMARY KEY,
    permits integer      NOT NULL
);

CREATE TABLE sqllock_job_schedule (
    job_name varchar(255) NOT NULL PRIMARY KEY,
    next_due timestamptz  NOT NULL
);

-- +goose Down
DROP TABLE sqllock_job_schedule;
DROP TABLE sqllock_semaphore_sizes;
