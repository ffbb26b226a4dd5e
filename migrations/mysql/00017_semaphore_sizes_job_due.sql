-- +goose Up
-- What one lock row cannot say, for operators' tools (sqllock locks):
-- how many permits a semaphore's key has, as the last Semaphore to take
-- one of them declared it ("permit 2 of 3"), and when a job next fires,
-- as the schedule of the last replica whose Loop ran it (UTC, as in the
-- lock tables). One row per key or job name, whatever the permit or job
-- table; names compare byte for byte, as keys do.
CREATE TABLE sqllock_semaphore_sizes (
    sem_key varbinary(255) NOT NULL PRIMARY KEY,
    permits int            NOT NULL
) ENGINE=InnoDB;

CREATE TABLE sqllock_job_schedule (
    job_name varbinary(255) NOT NULL PRIMARY KEY,
    next_due datetime(6)    NOT NULL
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE sqllock_job_schedule;
DROP TABLE sqllock_semaphore_sizes;
