-- +goose Up
-- The fencing-token source of the MySQL path, which runs on MySQL 8
-- (no SEQUENCE) and on MariaDB. An AUTO_INCREMENT counter is crash-safe and
-- never hands a value out twice (InnoDB persists it since MySQL 8.0 and
-- MariaDB 10.2.4; a rollback does not give a value back). The function
-- draws one ticket and deletes its row in the caller's statement, so the
-- table stays empty and a token is drawn by the statement that holds the
-- lock, as NEXTVAL is on MariaDB's own path. It inserts rather than bumps
-- a counter row: a row lock would last to the end of a rowlock
-- transaction and serialise every holder.
CREATE TABLE sqllock_tickets (
    id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY
) ENGINE=InnoDB;

-- On MariaDB the tickets start above every token the sequence handed out,
-- so a database moved to the common path keeps its tokens growing. MySQL
-- reads /*M! ... */ as a comment (and has no sequence).
INSERT INTO sqllock_tickets (id) SELECT 1 /*M! + NEXTVAL(sqllock_fence_seq) */;
DELETE FROM sqllock_tickets;

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

-- +goose Down
DROP FUNCTION sqllock_next_token;
DROP TABLE sqllock_tickets;
