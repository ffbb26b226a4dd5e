-- +goose Up
-- The audit trail of operators' actions on locks: each force release
-- writes one row in the transaction that frees the key, naming the holder
-- it freed (owner, host, token, holds), the operator's host/pid and the
-- reason given.
CREATE TABLE sqllock_audit (
    id         bigserial    PRIMARY KEY,
    at         timestamptz  NOT NULL,
    action     varchar(32)  NOT NULL,
    lock_table varchar(255) NOT NULL,
    lock_key   varchar(255) NOT NULL,
    token      bigint       NOT NULL,
    owner      varchar(64)  NOT NULL,
    host       varchar(255) NOT NULL,
    hold_count integer      NOT NULL,
    operator   varchar(255) NOT NULL,
    reason     text         NOT NULL
);

-- Package semaphore: one row per permit slot ("<key>#<slot>"), the lock
-- table's shape (with 00008's wanted flag), so the expiring-row engine
-- serves permits as locks.
CREATE TABLE sqllock_semaphores (
    lock_key    varchar(255) NOT NULL PRIMARY KEY,
    owner       varchar(64)  NOT NULL,
    host        varchar(255) NOT NULL,
    hold_count  integer      NOT NULL,
    token       bigint       NOT NULL,
    acquired_at timestamptz  NOT NULL,
    expires_at  timestamptz  NOT NULL,
    wanted      boolean      NOT NULL DEFAULT false
);
CREATE INDEX sqllock_semaphores_expires_at ON sqllock_semaphores (expires_at);

-- Package election: one row per leadership, the term (the leadership
-- lease's fencing token) with the leader's value and when it began.
CREATE TABLE sqllock_elections (
    name  varchar(255) NOT NULL,
    term  bigint       NOT NULL,
    value text         NOT NULL,
    since timestamptz  NOT NULL,
    PRIMARY KEY (name, term)
);

-- +goose Down
DROP TABLE sqllock_elections;
DROP TABLE sqllock_semaphores;
DROP TABLE sqllock_audit;
