-- +goose Up
-- On MariaDB both paths draw their tokens from one counter, so a database
-- moved from one path to the other, in either direction and while both
-- still run, never hands out a token below one already handed out.
-- 00010 started the tickets above the sequence once; the MariaDB path
-- then kept drawing from the sequence alone, and the MySQL path from the
-- tickets alone, so the first token after a move could be smaller.
--
-- sqllock_next_token() still draws a ticket, and then, on MariaDB:
--   - outside Galera, returns NEXTVAL(sqllock_fence_seq), the MariaDB
--     path's own source, drawing until it passes the ticket: the tickets
--     may be ahead after a time on the MySQL path before this migration,
--     or on Galera;
--   - on a Galera node, returns the ticket. A cached sequence is not
--     replicated by Galera, so the sequence is not drawn there; the
--     ticket counter is raised once above every value the sequence could
--     have handed out (its next_not_cached_value) before the server
--     joined a cluster.
-- Whether the server is a Galera node is read once per session (a user
-- variable): @@wsrep_on is unknown to a server built without Galera, and
-- a function naming it could not be created there. MySQL reads MariaDB's
-- executable comments as comments (it has no sequence): there the
-- function is 00010's, and so on a database created on a Galera node,
-- where ForServer leaves them out.

-- The sequence starts above every ticket handed out so far. SETVAL never
-- moves a sequence back, but takes a number, not an expression: the
-- procedure builds the statement.
-- +goose StatementBegin
CREATE PROCEDURE sqllock_raise_fence_seq()
BEGIN
    /*M!
    INSERT INTO sqllock_tickets () VALUES ();
    SET @sqllock_raise = CONCAT('DO SETVAL(sqllock_fence_seq, ', LAST_INSERT_ID(), ')');
    DELETE FROM sqllock_tickets WHERE id = LAST_INSERT_ID();
    PREPARE raise_seq FROM @sqllock_raise;
    EXECUTE raise_seq;
    DEALLOCATE PREPARE raise_seq;
    SET @sqllock_raise = NULL;
    */
END
-- +goose StatementEnd
CALL sqllock_raise_fence_seq();
DROP PROCEDURE sqllock_raise_fence_seq;

DROP FUNCTION sqllock_next_token;
-- +goose StatementBegin
CREATE FUNCTION sqllock_next_token() RETURNS bigint
    NOT DETERMINISTIC MODIFIES SQL DATA
BEGIN
    DECLARE t bigint;
    DECLARE s bigint;
    INSERT INTO sqllock_tickets () VALUES ();
    SET t = LAST_INSERT_ID();
    DELETE FROM sqllock_tickets WHERE id = t;
    /*M!
    IF @sqllock_wsrep_on IS NULL THEN
        SET @sqllock_wsrep_on = IFNULL((SELECT VARIABLE_VALUE = 'ON' FROM information_schema.GLOBAL_VARIABLES
            WHERE VARIABLE_NAME = 'WSREP_ON'), FALSE);
    END IF;
    IF @sqllock_wsrep_on THEN
        SET s = (SELECT next_not_cached_value FROM sqllock_fence_seq);
        IF t < s THEN
            INSERT IGNORE INTO sqllock_tickets (id) VALUES (s);
            DELETE FROM sqllock_tickets WHERE id = s;
            INSERT INTO sqllock_tickets () VALUES ();
            SET t = LAST_INSERT_ID();
            DELETE FROM sqllock_tickets WHERE id = t;
        END IF;
    ELSE
        SET s = NEXTVAL(sqllock_fence_seq);
        WHILE s <= t DO
            SET s = NEXTVAL(sqllock_fence_seq);
        END WHILE;
        SET t = s;
    END IF;
    */
    RETURN t;
END
-- +goose StatementEnd

-- +goose Down
-- 00010's function draws tickets alone: they start above the sequence
-- again, as 00010 started them.
INSERT INTO sqllock_tickets (id) SELECT 1 /*M! + NEXTVAL(sqllock_fence_seq) */;
DELETE FROM sqllock_tickets;
DROP FUNCTION sqllock_next_token;
-- +goose StatementBegin
CREATE FUNCTION sqllock_next_token() RETURNS bigint
    NOT DETERMINISTIC MODIFIES SQL DATA
BEGIN
    DECLARE t bigint;
    INSERT INTO sqllock_tickets () VALUES ();
    SET t = LAST_INSERT_ID();
    DELETE FROM sqllock_tickets WHERE id = t;
    RETURN t;
END
-- +goose StatementEnd
