-- +goose Up
-- The lock tables keep their rows in the primary key's B-tree (WITHOUT
-- ROWID): a rowid table with a TEXT primary key is two B-trees, the rows
-- by rowid and an index by key, so every take and release wrote a page
-- of each; with the fence row's page a take wrote three, where a bare
-- lock table writes two per statement. Measured apart (one connection,
-- a take and a release of tablelock's shape, 1.5 s, two rounds): 6,358 ·
-- 6,021 a second as rowid tables, 8,178 · 8,056 WITHOUT ROWID, beside a
-- bare table's 7,617 · 8,002. SQLite cannot change a table to WITHOUT
-- ROWID in place, so each is rebuilt, rows and tokens copied, and its
-- token triggers (migration 00018) made again. A lock table made by
-- CreateTable has the same shape.
CREATE TABLE sqllock_locks_new (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO sqllock_locks_new (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at FROM sqllock_locks;
DROP TABLE sqllock_locks;
ALTER TABLE sqllock_locks_new RENAME TO sqllock_locks;
-- +goose StatementBegin
CREATE TRIGGER sqllock_locks_token_in AFTER INSERT ON sqllock_locks BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sqllock_locks_token_up AFTER UPDATE OF token ON sqllock_locks WHEN NEW.token > OLD.token BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd
CREATE TABLE sqllock_jobs_new (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO sqllock_jobs_new (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at FROM sqllock_jobs;
DROP TABLE sqllock_jobs;
ALTER TABLE sqllock_jobs_new RENAME TO sqllock_jobs;
-- +goose StatementBegin
CREATE TRIGGER sqllock_jobs_token_in AFTER INSERT ON sqllock_jobs BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sqllock_jobs_token_up AFTER UPDATE OF token ON sqllock_jobs WHEN NEW.token > OLD.token BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd

-- +goose Down
-- Rebuilt as rowid tables again, rows and tokens kept.
-- describe: table sqllock_jobs
CREATE TABLE sqllock_jobs_new (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
-- describe: table sqllock_jobs
INSERT INTO sqllock_jobs_new (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at FROM sqllock_jobs;
DROP TABLE sqllock_jobs;
-- describe: table sqllock_jobs
ALTER TABLE sqllock_jobs_new RENAME TO sqllock_jobs;
-- +goose StatementBegin
-- describe: table sqllock_jobs
CREATE TRIGGER sqllock_jobs_token_in AFTER INSERT ON sqllock_jobs BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd
-- +goose StatementBegin
-- describe: table sqllock_jobs
CREATE TRIGGER sqllock_jobs_token_up AFTER UPDATE OF token ON sqllock_jobs WHEN NEW.token > OLD.token BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd
-- describe: table sqllock_locks
CREATE TABLE sqllock_locks_new (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
-- describe: table sqllock_locks
INSERT INTO sqllock_locks_new (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at FROM sqllock_locks;
DROP TABLE sqllock_locks;
-- describe: table sqllock_locks
ALTER TABLE sqllock_locks_new RENAME TO sqllock_locks;
-- +goose StatementBegin
-- describe: table sqllock_locks
CREATE TRIGGER sqllock_locks_token_in AFTER INSERT ON sqllock_locks BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd
-- +goose StatementBegin
-- describe: table sqllock_locks
CREATE TRIGGER sqllock_locks_token_up AFTER UPDATE OF token ON sqllock_locks WHEN NEW.token > OLD.token BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd
