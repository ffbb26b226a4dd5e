-- +goose Up
-- Tokens that cost no WAL flush, for sessions that draw many (advisory's
-- pinned sessions). A token drawn by nextval makes every 32nd commit wait
-- for a WAL flush; with the flush skipped (synchronous_commit off for the
-- drawing transaction alone) a crash can lose the last sequence values
-- handed out, and the sequence would hand them out again. So these tokens
-- carry, above the sequence value, an era that moves past every era
-- before it whenever the sequence may have lost values:
--
--     token = era << 40 | nextval('sqllock_fence_seq')
--     era   = timeline << 12 | eras begun on this timeline before it
--
--   - sqllock_token_life, an unlogged table, holds the current era. A
--     crash recovery empties it, and so does a promotion (a standby's
--     unlogged tables are empty), so an empty table means the sequence
--     may have gone back: sqllock_token_era() then begins a new era,
--     recorded in sqllock_token_era (logged) by a commit that waits for
--     its flush, before any token of it is drawn.
--   - A clean shutdown flushes every sequence value handed out, and keeps
--     the unlogged table: the era goes on.
--   - No session lives through a crash recovery, and a session on a
--     standby cannot read an unlogged table, so a session that read the
--     era may draw tokens of it for as long as it lives.
--   - The timeline in the era's high bits keeps a promoted standby, whose
--     copy of sqllock_token_era may lag the old primary's, above every era
--     the old primary began.
--
-- Tokens of an era sort above every token sqllock_next_token draws on the
-- same or an earlier timeline (timeline << 40 | value): a key fenced first
-- with those and then with these is accepted; the other way round it is
-- refused. Past 4095 eras on one timeline, or a timeline at or past 2^11,
-- sqllock_token_era() refuses rather than hand out an era that could
-- repeat.
CREATE TABLE sqllock_token_era (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    era bigint NOT NULL
);
INSERT INTO sqllock_token_era (era) VALUES (0);
CREATE UNLOGGED TABLE sqllock_token_life (era bigint NOT NULL);

-- SECURITY DEFINER: an application role needs EXECUTE alone (PUBLIC,
-- below), no grant on the two tables, so a schema migrated under a live
-- application keeps taking locks.
-- +goose StatementBegin
CREATE FUNCTION sqllock_token_era() RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    e  bigint;
    tl bigint;
BEGIN
    SELECT era INTO e FROM sqllock_token_life;
    IF FOUND THEN
        RETURN e;
    END IF;
    -- One session begins the era; the others wait here and read it.
    SELECT era INTO e FROM sqllock_token_era FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'sqllock: sqllock_token_era has lost its row, so a new token era could repeat one already used'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'insert one row whose era is above every token handed out, shifted right by 40';
    END IF;
    PERFORM 1 FROM sqllock_token_life;
    IF FOUND THEN
        SELECT era INTO e FROM sqllock_token_life;
        RETURN e;
    END IF;
    tl := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
    e := greatest(e + 1, tl << 12);
    IF tl >= 2048 OR e >> 12 <> tl THEN
        RAISE EXCEPTION 'sqllock: no new token era on timeline % after era % (%.%)', tl, e - 1, (e - 1) >> 12, (e - 1) & 4095
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'an era is timeline << 12 | eras begun on that timeline; 4095 crash recoveries on one timeline, or a timeline past 2047, leave none';
    END IF;
    UPDATE sqllock_token_era SET era = e;
    INSERT INTO sqllock_token_life (era) VALUES (e);
    -- The era is durable before any token of it is drawn, whatever the
    -- caller's synchronous_commit.
    IF current_setting('synchronous_commit') NOT IN ('on', 'remote_write', 'remote_apply') THEN
        PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
    RETURN e;
END
$$;
-- +goose StatementEnd
GRANT EXECUTE ON FUNCTION sqllock_token_era() TO PUBLIC;

-- The sequence value of a token of an era, drawn in a transaction that
-- does not wait for its WAL flush (the era covers a lost value). With
-- sqllock.require_sync_replica on, it is drawn as sqllock_next_token_counter
-- draws it, refusals and all, and the commit waits. One SQL expression,
-- inlined into the calling statement.
-- +goose StatementBegin
CREATE FUNCTION sqllock_next_token_async() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
SELECT CASE
    WHEN lower(coalesce(current_setting('sqllock.require_sync_replica', true), '')) IN ('on', 'true', 'yes', '1')
        THEN sqllock_next_token_counter()
    WHEN set_config('synchronous_commit', 'off', true) = 'off'
        THEN nextval('sqllock_fence_seq')
END
$$;
-- +goose StatementEnd
GRANT EXECUTE ON FUNCTION sqllock_next_token_async() TO PUBLIC;

-- +goose Down
-- Tokens go back to timeline << 40 | value, below every token of an era:
-- a key fenced with an era's token refuses them.
DROP FUNCTION sqllock_next_token_async;
DROP FUNCTION sqllock_token_era;
DROP TABLE sqllock_token_life;
DROP TABLE sqllock_token_era;
