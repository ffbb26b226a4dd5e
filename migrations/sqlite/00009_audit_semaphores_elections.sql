-- +goose Up
-- The audit trail of operators' actions on locks: each force release
-- writes one row in the transaction that frees the key, naming the holder
-- it freed (owner, host, token, holds), the operator's host/pid and the
-- reason given. Times are microseconds since the Unix epoch, as in the
-- lock tables.
CREATE TABLE sqllock_audit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,
    action     TEXT    NOT NULL,
    lock_table TEXT    NOT NULL,
    lock_key   TEXT    NOT NULL,
    token      INTEGER NOT NULL,
    owner      TEXT    NOT NULL,
    host       TEXT    NOT NULL,
    hold_count INTEGER NOT NULL,
    operator   TEXT    NOT NULL,
    reason     TEXT    NOT NULL
);

-- Package semaphore: one row per permit slot ("<key>#<slot>"), the lock
-- table's shape, so the expiring-row engine serves permits as locks.
CREATE TABLE sqllock_semaphores (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX sqllock_semaphores_expires_at ON sqllock_semaphores (expires_at);

-- Package election: one row per leadership, the term (the leadership
-- lease's fencing token) with the leader's value and when it began.
CREATE TABLE sqllock_elections (
    name  TEXT    NOT NULL,
    term  INTEGER NOT NULL,
    value TEXT    NOT NULL,
    since INTEGER NOT NULL,
    PRIMARY KEY (name, term)
);

-- +goose Down
DROP TABLE sqllock_elections;
DROP TABLE sqllock_semaphores;
DROP TABLE sqllock_audit;
