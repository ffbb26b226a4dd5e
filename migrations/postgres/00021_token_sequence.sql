-- +goose Up
-- Era tokens (migration 00020) drawn from a sequence of their own,
-- sqllock_token_seq, UNLOGGED on PostgreSQL 15 and later. A draw from an
-- unlogged sequence writes no WAL, so the drawing statement takes no
-- transaction id and commits nothing: no set_config, no commit record.
-- Measured beside 00020's draw (an advisory lock, its token and its
-- unlock on one pgx connection, alternated pair by pair): p25 71.0-74.6
-- µs against 74.5-78.0 µs; the lock with no token at all ran 72.2-72.6.
--
-- Why its values are safe:
--   - A crash recovery and a promotion reset an unlogged sequence to its
--     start, and empty sqllock_token_life with it: the next era covers
--     the values handed out again, as it covers lost values of 00020's.
--     A clean shutdown keeps both.
--   - Within one era the two sequences' values must never interleave. A
--     statement planned with 00020's body before this commit may still
--     draw from sqllock_fence_seq after it (an advisory wait begun before
--     it), while tablelock goes on drawing from that sequence. So the
--     remaining range is split: sqllock_fence_seq keeps the lower half
--     (its MAXVALUE refuses past it), sqllock_token_seq starts above it.
--     Every value drawn the old way sorts below every value drawn the new
--     way, whatever the order of the draws.
--   - The ALTER below waits for every draw in flight and holds new ones
--     until this commits, so the split is read from a quiet sequence.
--     A draw holds the sequence's lock until its transaction ends (a
--     rowlock holder's, a transaction-level advisory lock's), and every
--     later draw would queue behind the ALTER: it waits 2 s at most
--     (lock_timeout) and then refuses, saying so, and nothing changes.
--
-- The sqllock.require_sync_replica check is a function of its own,
-- sqllock_next_token_checked, called only where the setting exists: a
-- statement's executor start looks up and checks EXECUTE on every
-- function of its expression, taken or not, and the check's dozen cost
-- 2-3 µs a statement even where it is never evaluated (a lock, its token
-- and its unlock, alternated pair by pair, p25: bare lock 104-107 µs,
-- nextval alone 108-110, the check inlined 118-121, split off 112-115).
-- Where the setting is defined at all, even off, tokens take the check's
-- call, a few µs more.
--
-- PostgreSQL 13 and 14 have no unlogged sequences: there the sequence is
-- logged and drawn as 00020 draws, in a transaction that does not wait
-- for its flush. An application role needs USAGE on the new sequence;
-- every role granted on sqllock_fence_seq is granted the same here, so a
-- schema migrated under a live application keeps taking locks.
-- +goose StatementBegin
DO $$
DECLARE
    maxv     constant bigint := 1099511627775;
    unlogged constant boolean := current_setting('server_version_num')::int >= 150000;
    n        bigint;
    split    bigint;
    g        record;
BEGIN
    PERFORM set_config('lock_timeout', '2s', true);
    BEGIN
        -- Changes nothing: takes the sequence's lock.
        ALTER SEQUENCE sqllock_fence_seq MAXVALUE 1099511627775;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION 'sqllock: migration 00021 waited 2s for sqllock_fence_seq while a transaction that drew a token from it still runs'
            USING ERRCODE = 'lock_not_available',
                  HINT = 'a rowlock holder or a transaction-level lock holds it until its transaction ends; run the migration again when none is held';
    END;
    SELECT last_value INTO n FROM sqllock_fence_seq;
    IF maxv - n < 4194304 THEN
        RAISE EXCEPTION 'sqllock: sqllock_fence_seq at %, too close to its end (2^40) to give era tokens a range of their own', n
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'a token is era or timeline << 40 | a sequence value below 2^40: this database has nearly used the values up';
    END IF;
    split := n + (maxv - n) / 2;
    EXECUTE format('ALTER SEQUENCE sqllock_fence_seq MAXVALUE %s', split);
    EXECUTE format('CREATE %s SEQUENCE sqllock_token_seq MINVALUE %s START %s MAXVALUE %s',
        CASE WHEN unlogged THEN 'UNLOGGED' ELSE '' END,
        split + 1, split + 1, maxv);
    FOR g IN SELECT a.grantee, a.privilege_type
             FROM pg_class c, aclexplode(c.relacl) a
             WHERE c.oid = 'sqllock_fence_seq'::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON SEQUENCE sqllock_token_seq TO %s', g.privilege_type,
            CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END);
    END LOOP;

    CREATE FUNCTION sqllock_next_token_checked() RETURNS bigint
    LANGUAGE plpgsql VOLATILE AS $f$
    BEGIN
        IF lower(coalesce(current_setting('sqllock.require_sync_replica', true), '')) IN ('on', 'true', 'yes', '1')
           AND (current_setting('synchronous_standby_names') = ''
                OR current_setting('synchronous_commit') NOT IN ('on', 'remote_write', 'remote_apply')) THEN
            RETURN sqllock_refuse_token('sync');
        END IF;
        RETURN nextval('sqllock_token_seq');
    END
    $f$;
    GRANT EXECUTE ON FUNCTION sqllock_next_token_checked() TO PUBLIC;

    IF unlogged THEN
        -- Nothing to flush: the draw is the sequence value alone.
        CREATE OR REPLACE FUNCTION sqllock_next_token_async() RETURNS bigint
        LANGUAGE sql VOLATILE AS $f$
        SELECT CASE
            WHEN current_setting('sqllock.require_sync_replica', true) IS NULL
                THEN nextval('sqllock_token_seq')
            ELSE sqllock_next_token_checked()
        END
        $f$;
    ELSE
        -- CASE, not AND: the check must read synchronous_commit before
        -- set_config turns it off.
        CREATE OR REPLACE FUNCTION sqllock_next_token_async() RETURNS bigint
        LANGUAGE sql VOLATILE AS $f$
        SELECT CASE
            WHEN current_setting('sqllock.require_sync_replica', true) IS NOT NULL
                THEN sqllock_next_token_checked()
            WHEN set_config('synchronous_commit', 'off', true) = 'off'
                THEN nextval('sqllock_token_seq')
        END
        $f$;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Era tokens go back to sqllock_fence_seq, raised above every value
-- sqllock_token_seq handed out (with room for draws planned before this
-- commit): within the era they keep growing.
-- +goose StatementBegin
DO $$
DECLARE
    n bigint;
BEGIN
    -- describe: function sqllock_next_token_async
    -- describe: sequence sqllock_fence_seq
    -- Takes the sequence's lock (only autocommit lock statements draw
    -- from it, so the wait is short).
    ALTER SEQUENCE sqllock_token_seq MAXVALUE 1099511627775;
    SELECT last_value INTO n FROM sqllock_token_seq;
    ALTER SEQUENCE sqllock_fence_seq MAXVALUE 1099511627775;
    PERFORM setval('sqllock_fence_seq', greatest(last_value, least(n + 1048576, 1099511627775))) FROM sqllock_fence_seq;
    CREATE OR REPLACE FUNCTION sqllock_next_token_async() RETURNS bigint
    LANGUAGE sql VOLATILE AS $f$
    SELECT CASE
        WHEN lower(coalesce(current_setting('sqllock.require_sync_replica', true), '')) IN ('on', 'true', 'yes', '1')
            THEN sqllock_next_token_counter()
        WHEN set_config('synchronous_commit', 'off', true) = 'off'
            THEN nextval('sqllock_fence_seq')
    END
    $f$;
END
$$;
-- +goose StatementEnd
DROP FUNCTION sqllock_next_token_checked;
DROP SEQUENCE sqllock_token_seq;
