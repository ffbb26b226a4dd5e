-- DDL: the lock table. varbinary: keys and owners compare byte for byte,
-- not by a collation that ignores case and trailing spaces. No index on
-- expires_at: every take and release writes it, and so would write the
-- index too (migration 00012).
CREATE TABLE `sqllock_locks` (
    lock_key    varbinary(255) NOT NULL PRIMARY KEY,
    owner       varbinary(64)  NOT NULL,
    host        varchar(255)   NOT NULL,
    hold_count  int            NOT NULL,
    token       bigint         NOT NULL,
    acquired_at datetime(6)    NOT NULL,
    expires_at  datetime(6)    NOT NULL
) ENGINE=InnoDB;
