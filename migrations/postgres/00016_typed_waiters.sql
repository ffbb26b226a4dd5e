-- +goose Up
-- A queue entry becomes typed data. Since 00013 an entry was a string: a
-- Locker's id, or (in fair order) the id, the claim window in 15 digits,
-- the lengths of the owner and the host in 2 and 3 digits, the owner and
-- the host, which every release decoded with substr at fixed offsets. Now
-- an entry is a sqllock_waiter: a waiting Locker's id (whom a release
-- calls), and, for a fair waiter, the lease a grant gives it (claim_us,
-- 0 for a Locker that is only called) and the owner and host a grant
-- names. A composite type rather than a table of waiters: the queue stays
-- in the row, read and changed under the row lock the take and the
-- release take anyway, so a release still writes one row, HOT, and a
-- lock table of any name (tablelock.WithTable) needs no second table.
-- called, the entry the last release called or granted, is one too
-- (NULL: none).
--
-- Every table of the lock table's shape in the schema is converted, the
-- default ones (sqllock_locks, sqllock_jobs, sqllock_semaphores) and those
-- made for WithTable alike: a statement reads the column's type, not the
-- table's name.
CREATE TYPE sqllock_waiter AS (caller text, claim_us bigint, owner text, host text);

-- +goose StatementBegin
CREATE FUNCTION sqllock_waiter_of_text(e text) RETURNS sqllock_waiter
LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT CASE WHEN length(e) <= 16 THEN ROW(e, 0, '', '')::sqllock_waiter
    ELSE ROW(left(e, 16), substr(e, 17, 15)::bigint,
        substr(e, 37, substr(e, 32, 2)::int),
        substr(e, 37 + substr(e, 32, 2)::int, substr(e, 34, 3)::int))::sqllock_waiter END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION sqllock_waiters_of_text(w text[]) RETURNS sqllock_waiter[]
LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT coalesce(array_agg(sqllock_waiter_of_text(w[i]) ORDER BY i), '{}') FROM generate_subscripts(w, 1) AS i
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN
        SELECT a.attrelid::regclass FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid AND c.relkind IN ('r', 'p')
        JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = ANY (current_schemas(false))
        JOIN pg_attribute k ON k.attrelid = a.attrelid AND k.attname = 'called' AND k.atttypid = 'text'::regtype
        WHERE a.attname = 'waiters' AND a.atttypid = 'text[]'::regtype AND NOT a.attisdropped
          AND EXISTS (SELECT 1 FROM pg_attribute h WHERE h.attrelid = a.attrelid AND h.attname = 'hold_count')
    LOOP
        EXECUTE format($f$ALTER TABLE %s
            ALTER COLUMN waiters DROP DEFAULT,
            ALTER COLUMN waiters TYPE sqllock_waiter[] USING sqllock_waiters_of_text(waiters),
            ALTER COLUMN waiters SET DEFAULT '{}',
            ALTER COLUMN called DROP DEFAULT,
            ALTER COLUMN called DROP NOT NULL,
            ALTER COLUMN called TYPE sqllock_waiter USING CASE WHEN called <> '' THEN sqllock_waiter_of_text(called) END$f$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION sqllock_waiters_of_text(text[]);
DROP FUNCTION sqllock_waiter_of_text(text);

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION sqllock_waiter_text(e sqllock_waiter) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT CASE WHEN e.claim_us = 0 THEN e.caller
    ELSE e.caller || lpad(e.claim_us::text, 15, '0') || lpad(char_length(e.owner)::text, 2, '0')
        || lpad(char_length(e.host)::text, 3, '0') || e.owner || e.host END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION sqllock_waiters_text(w sqllock_waiter[]) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT coalesce(array_agg(sqllock_waiter_text(w[i]) ORDER BY i), '{}') FROM generate_subscripts(w, 1) AS i
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- describe: every table of the lock table's shape (waiters and called back to text)
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN
        SELECT a.attrelid::regclass FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid AND c.relkind IN ('r', 'p')
        JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = ANY (current_schemas(false))
        WHERE a.attname = 'waiters' AND a.atttypid = 'sqllock_waiter[]'::regtype AND NOT a.attisdropped
    LOOP
        EXECUTE format($f$ALTER TABLE %s
            ALTER COLUMN waiters DROP DEFAULT,
            ALTER COLUMN waiters TYPE text[] USING sqllock_waiters_text(waiters),
            ALTER COLUMN waiters SET DEFAULT '{}',
            ALTER COLUMN called TYPE text USING coalesce(sqllock_waiter_text(called), ''),
            ALTER COLUMN called SET DEFAULT '',
            ALTER COLUMN called SET NOT NULL$f$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION sqllock_waiters_text(sqllock_waiter[]);
DROP FUNCTION sqllock_waiter_text(sqllock_waiter);
DROP TYPE sqllock_waiter;
