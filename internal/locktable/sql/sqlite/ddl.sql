-- DDL: the lock table. Timestamps are microseconds since the Unix epoch.
-- No index on expires_at (migration 00018 dropped it): every take and
-- release moves the expiry, and keeping an index of it wrote two pages
-- more per acquire and release, a third of their cost. Only the reaper
-- and List look rows up by expiry; they read the table through.
CREATE TABLE `sqllock_locks` (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
