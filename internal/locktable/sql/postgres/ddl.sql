CREATE TABLE "sqllock_locks" (
    lock_key    varchar(255) NOT NULL PRIMARY KEY,
    owner       varchar(64)  NOT NULL,
    host        varchar(255) NOT NULL,
    hold_count  integer      NOT NULL,
    token       bigint       NOT NULL,
    acquired_at timestamptz  NOT NULL,
    expires_at  timestamptz  NOT NULL,
    wanted      boolean      NOT NULL DEFAULT false,
    waiters     sqllock_waiter[] NOT NULL DEFAULT '{}',
    called      sqllock_waiter
) WITH (fillfactor = 50);
