-- +goose Up
-- One sequence per database hands out every strategy's fencing tokens.
CREATE SEQUENCE sqllock_fence_seq;

CREATE TABLE sqllock_locks (
    lock_key    varchar(255) NOT NULL PRIMARY KEY,
    owner       varchar(64)  NOT NULL,
    host        varchar(255) NOT NULL,
    hold_count  integer      NOT NULL,
    token       bigint       NOT NULL,
    acquired_at timestamptz  NOT NULL,
    expires_at  timestamptz  NOT NULL
);
CREATE INDEX sqllock_locks_expires_at ON sqllock_locks (expires_at);

-- +goose Down
DROP TABLE sqllock_locks;
DROP SEQUENCE sqllock_fence_seq;
