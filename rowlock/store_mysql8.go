package rowlock

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/sqllock/sqllock"
)

func init() { register(sqllock.MySQL, mysqlCommonDialect{}) }

// mysqlCommonDialect is the MySQL path (MySQL 8, and MariaDB when chosen):
// MariaDB's statements without NEXTVAL, WAIT n, SET STATEMENT and
// information_schema.SESSION_STATUS, which MySQL 8 lacks.
type mysqlCommonDialect struct{ mysqlDialect }

func (mysqlCommonDialect) tokenQuery() string { return `SELECT sqllock_next_token()` }

// newStore: the locking read draws the token with sqllock_next_token()
// (migration 00010) in its select list, once the row is locked. A blocked
// read waits innodb_lock_wait_timeout (the server's; no WAIT n) and is
// repeated on 1205 until the context ends, which kills the session, as on
// MariaDB. A NOWAIT refusal is 3572 on MySQL 8 and 1205 on MariaDB; both
// read as refused.
func (mysqlCommonDialect) newStore(t string, env storeEnv) store {
	return &mysqlCommonStore{mysqlStore: &mysqlStore{
		env: env,
		// LOCK IN SHARE MODE is the shared read both servers parse; its
		// NOWAIT only MariaDB's (MySQL 8 wants FOR SHARE NOWAIT, which
		// MariaDB lacks): no shared try here. Its slot stays empty, and
		// the prepared list holds the blocking read twice instead.
		prepared: []string{
			myLockNoWait:  `SELECT sqllock_next_token() FROM ` + t + ` WHERE lock_key = ? FOR UPDATE NOWAIT`,
			myLockWait:    `SELECT sqllock_next_token() FROM ` + t + ` WHERE lock_key = ? FOR UPDATE`,
			myShareNoWait: `SELECT sqllock_next_token() FROM ` + t + ` WHERE lock_key = ? LOCK IN SHARE MODE`,
			myShareWait:   `SELECT sqllock_next_token() FROM ` + t + ` WHERE lock_key = ? LOCK IN SHARE MODE`,
		},
		noSharedTry: true,
		// A held row makes it wait: it only runs after a locking read found
		// no row, so one held since is rare, and the context bounds it.
		ensure:       `INSERT IGNORE INTO ` + t + ` (lock_key) VALUES (?)`,
		sessionQuery: `SELECT CONNECTION_ID(), UNIX_TIMESTAMP()`,
		aliveQuery:   `SELECT ID, UNIX_TIMESTAMP() FROM information_schema.PROCESSLIST WHERE FIND_IN_SET(ID, ?) > 0`,
	}}
}

// mysqlCommonStore tells a session's life by the server's start read from
// SHOW GLOBAL STATUS (information_schema.SESSION_STATUS is gone in MySQL
// 8, and performance_schema is off by default on MariaDB): Unix time less
// Uptime, in whole seconds from two statements, so two reads of one
// server life may differ by a second or two.
type mysqlCommonStore struct{ *mysqlStore }

// startSlack is how far apart two reads of one server's start may be.
const startSlack = 2

func (s *mysqlCommonStore) serverStart(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, now int64) (int64, error) {
	var name, up string
	if err := q.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Uptime'`).Scan(&name, &up); err != nil {
		return 0, err
	}
	u, err := strconv.ParseInt(up, 10, 64)
	return now - u, err
}

func (s *mysqlCommonStore) session(ctx context.Context, conn *sql.Conn) (holder, error) {
	return s.sessions.get(conn, func() (h holder, err error) {
		var now int64
		if err = conn.QueryRowContext(ctx, s.sessionQuery).Scan(&h.session, &now); err != nil {
			return h, err
		}
		h.life, err = s.serverStart(ctx, conn, now)
		return h, err
	})
}

func (s *mysqlCommonStore) alive(ctx context.Context, held []holder) ([]bool, error) {
	rows, err := s.env.stmts.Query(ctx, s.env.db, s.aliveQuery, joinSessions(held))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	present := make(map[int64]bool, len(held))
	var now int64 // the server's clock, never this process's
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &now); err != nil {
			return nil, err
		}
		present[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	alive := make([]bool, len(held))
	if len(present) == 0 {
		return alive, nil
	}
	start, err := s.serverStart(ctx, s.env.db, now)
	if err != nil {
		return nil, err
	}
	for i, h := range held {
		alive[i] = present[h.session] && h.life >= start-startSlack
	}
	return alive, nil
}

func (s *mysqlCommonStore) gone(ctx context.Context, sessions []holder) (bool, error) {
	alive, err := s.alive(ctx, sessions)
	if err != nil {
		return false, err
	}
	for _, a := range alive {
		if a {
			return false, nil
		}
	}
	return true, nil
}
