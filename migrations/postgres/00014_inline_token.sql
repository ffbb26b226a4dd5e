-- +goose Up
-- sqllock_next_token (migration 00011) as one SQL expression, which the
-- planner inlines into the calling statement: a PL/pgSQL call costs every
-- statement that draws a token 3-4 µs more (an advisory lock, its token
-- and its unlock took 96-110 µs with it, 93-106 µs inlined, 81-96 µs with
-- a bare nextval, alternated call by call). Same token, same refusals:
--
--   - with sqllock.require_sync_replica on and commits that would not wait
--     for a synchronous standby, sqllock_refuse_token raises the same
--     error (SQLSTATE 55000), now before a token is drawn;
--   - on a standby nextval refuses first, as before (a read-only
--     transaction), rather than the WAL functions;
--   - a timeline past 2^23 is refused by sqllock_refuse_token, and a
--     sequence past 2^40 by the sequence itself: its MAXVALUE is set here,
--     as the expression can read nextval only once.
--
-- An application role still needs only USAGE on the sequence and EXECUTE
-- on both functions (PUBLIC, below).
ALTER SEQUENCE sqllock_fence_seq MAXVALUE 1099511627775;

-- +goose StatementBegin
CREATE FUNCTION sqllock_refuse_token(what text) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF what = 'sync' THEN
        RAISE EXCEPTION 'sqllock: sqllock.require_sync_replica is on but this commit would not wait for a synchronous standby (synchronous_standby_names %, synchronous_commit %): a lock taken now could be lost in a failover',
            quote_literal(current_setting('synchronous_standby_names')), current_setting('synchronous_commit')
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RAISE EXCEPTION 'sqllock: fencing token out of range: timeline %', ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
        USING HINT = 'tokens are timeline << 40 | sequence value; the sequence must stay below 2^40 and the timeline below 2^23';
END
$$;
-- +goose StatementEnd
-- Every function of the expression needs EXECUTE when a statement starts,
-- even where its branch is not taken: granted to PUBLIC explicitly, so a
-- schema whose default privileges leave PUBLIC out still takes locks.
GRANT EXECUTE ON FUNCTION sqllock_refuse_token(text) TO PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION sqllock_next_token() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
SELECT CASE
    WHEN lower(coalesce(current_setting('sqllock.require_sync_replica', true), '')) IN ('on', 'true', 'yes', '1')
         AND (current_setting('synchronous_standby_names') = ''
              OR current_setting('synchronous_commit') NOT IN ('on', 'remote_write', 'remote_apply'))
        THEN sqllock_refuse_token('sync')
    WHEN pg_is_in_recovery() THEN nextval('sqllock_fence_seq')
    WHEN ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint >= 8388608
        THEN sqllock_refuse_token('timeline')
    ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint << 40 | nextval('sqllock_fence_seq')
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION sqllock_next_token() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n  bigint := nextval('sqllock_fence_seq');
    tl bigint := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
BEGIN
    IF lower(coalesce(current_setting('sqllock.require_sync_replica', true), '')) IN ('on', 'true', 'yes', '1')
       AND (current_setting('synchronous_standby_names') = ''
            OR current_setting('synchronous_commit') NOT IN ('on', 'remote_write', 'remote_apply')) THEN
        RAISE EXCEPTION 'sqllock: sqllock.require_sync_replica is on but this commit would not wait for a synchronous standby (synchronous_standby_names %, synchronous_commit %): a lock taken now could be lost in a failover',
            quote_literal(current_setting('synchronous_standby_names')), current_setting('synchronous_commit')
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF n >= 1099511627776 OR tl >= 8388608 THEN
        RAISE EXCEPTION 'sqllock: fencing token out of range: sequence sqllock_fence_seq at %, timeline %', n, tl
            USING HINT = 'tokens are timeline << 40 | sequence value; the sequence must stay below 2^40 and the timeline below 2^23';
    END IF;
    RETURN tl << 40 | n;
END
$$;
-- +goose StatementEnd
DROP FUNCTION sqllock_refuse_token;
ALTER SEQUENCE sqllock_fence_seq NO MAXVALUE;
