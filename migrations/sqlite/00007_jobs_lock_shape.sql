-- +goose Up
-- sqllock_jobs takes the lock table's shape, so that one set of statements
-- serves jobs and locks: a job is a lock row kept until its hold-at-least
-- after its run released it. hold_count is 1 for a run still holding its
-- job (owner set) and 0 for one released. SQLite cannot place an added
-- column nor drop its default, so the table is rebuilt, rows and tokens
-- copied.
CREATE TABLE sqllock_jobs_new (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
INSERT INTO sqllock_jobs_new (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
SELECT name, owner, locked_by, CASE WHEN owner <> '' THEN 1 ELSE 0 END, token, locked_at, locked_until FROM sqllock_jobs;
DROP TABLE sqllock_jobs;
ALTER TABLE sqllock_jobs_new RENAME TO sqllock_jobs;
CREATE INDEX sqllock_jobs_expires_at ON sqllock_jobs (expires_at);

-- +goose Down
-- In place (SQLite 3.35+ drops columns): the table 00004 made, rows kept.
DROP INDEX sqllock_jobs_expires_at;
ALTER TABLE sqllock_jobs DROP COLUMN hold_count;
ALTER TABLE sqllock_jobs RENAME COLUMN expires_at TO locked_until;
ALTER TABLE sqllock_jobs RENAME COLUMN acquired_at TO locked_at;
ALTER TABLE sqllock_jobs RENAME COLUMN host TO locked_by;
ALTER TABLE sqllock_jobs RENAME COLUMN lock_key TO name;
