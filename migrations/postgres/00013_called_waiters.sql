-- +goose Up
-- waiters: the Lockers waiting for a key, by id, in the order their first
-- refusal queued them; called: the one the last release called. A release
-- that leaves the key free calls the first waiter alone, on a channel of
-- its own, instead of announcing the key to every waiting Locker: on a hot
-- key all of them woke, and all but one were refused in a queue on the row
-- lock, before the new holder could release. The row stays the only truth:
-- a call says "look now", and a Locker that was called in vain is passed
-- over by the others after a short grace. The tables of the lock table's
-- shape (jobguard's, the semaphores' permits) follow.
ALTER TABLE sqllock_locks ADD COLUMN waiters text[] NOT NULL DEFAULT '{}';
ALTER TABLE sqllock_locks ADD COLUMN called text NOT NULL DEFAULT '';
ALTER TABLE sqllock_jobs ADD COLUMN waiters text[] NOT NULL DEFAULT '{}';
ALTER TABLE sqllock_jobs ADD COLUMN called text NOT NULL DEFAULT '';
ALTER TABLE sqllock_semaphores ADD COLUMN waiters text[] NOT NULL DEFAULT '{}';
ALTER TABLE sqllock_semaphores ADD COLUMN called text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sqllock_semaphores DROP COLUMN called;
ALTER TABLE sqllock_semaphores DROP COLUMN waiters;
ALTER TABLE sqllock_jobs DROP COLUMN called;
ALTER TABLE sqllock_jobs DROP COLUMN waiters;
ALTER TABLE sqllock_locks DROP COLUMN called;
ALTER TABLE sqllock_locks DROP COLUMN waiters;
