-- +goose Up
-- Owners are identities and compare byte for byte, as keys already do. As
-- varchar in the default collation (utf8mb4_general_ci, case-insensitive
-- and PAD SPACE) "WORKER-A" could release or extend the lock of
-- "worker-a" or of "worker-a ". varbinary rather than a _bin collation:
-- MariaDB's _bin collations still ignore trailing spaces. Owners are at
-- most 64 bytes of UTF-8 (sqllock.MaxOwnerLen), so every stored one fits.
-- Tables made with tablelock.CreateTable or jobguard.CreateTable need the
-- same ALTER.
ALTER TABLE sqllock_locks MODIFY owner varbinary(64) NOT NULL;
ALTER TABLE sqllock_jobs MODIFY owner varbinary(64) NOT NULL;

-- +goose Down
ALTER TABLE sqllock_jobs MODIFY owner varchar(64) NOT NULL;
ALTER TABLE sqllock_locks MODIFY owner varchar(64) NOT NULL;
