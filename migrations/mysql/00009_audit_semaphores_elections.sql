-- +goose Up
-- The audit trail of operators' actions on locks: each force release
-- writes one row in the transaction that frees the key, naming the holder
-- it freed (owner, host, token, holds), the operator's host/pid and the
-- reason given. Times are UTC, as in the lock tables.
CREATE TABLE sqllock_audit (
    id         bigint         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at         datetime(6)    NOT NULL,
    action     varchar(32)    NOT NULL,
    lock_table varchar(255)   NOT NULL,
    lock_key   varbinary(255) NOT NULL,
    token      bigint         NOT NULL,
    owner      varbinary(64)  NOT NULL,
    host       varchar(255)   NOT NULL,
    hold_count int            NOT NULL,
    operator   varchar(255)   NOT NULL,
    reason     text           NOT NULL
) ENGINE=InnoDB;

-- Package semaphore: one row per permit slot ("<key>#<slot>"), the lock
-- table's shape, so the expiring-row engine serves permits as locks.
CREATE TABLE sqllock_semaphores (
    lock_key    varbinary(255) NOT NULL PRIMARY KEY,
    owner       varbinary(64)  NOT NULL,
    host        varchar(255)   NOT NULL,
    hold_count  int            NOT NULL,
    token       bigint         NOT NULL,
    acquired_at datetime(6)    NOT NULL,
    expires_at  datetime(6)    NOT NULL,
    KEY sqllock_semaphores_expires_at (expires_at)
) ENGINE=InnoDB;

-- Package election: one row per leadership, the term (the leadership
-- lease's fencing token) with the leader's value and when it began.
CREATE TABLE sqllock_elections (
    name  varbinary(255) NOT NULL,
    term  bigint         NOT NULL,
    value text           NOT NULL,
    since datetime(6)    NOT NULL,
    PRIMARY KEY (name, term)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE sqllock_elections;
DROP TABLE sqllock_semaphores;
DROP TABLE sqllock_audit;
