-- +goose Up
-- SQLite has no sequences: one row holds the last fencing token issued.
CREATE TABLE sqllock_fence (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
);
INSERT INTO sqllock_fence (id, value) VALUES (1, 0);

-- Timestamps are microseconds since the Unix epoch.
CREATE TABLE sqllock_locks (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX sqllock_locks_expires_at ON sqllock_locks (expires_at);

-- +goose Down
DROP TABLE sqllock_locks;
DROP TABLE sqllock_fence;
