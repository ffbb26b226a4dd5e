package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/lease"
)

func init() { register(sqllock.MariaDB, mysqlDialect{}) }

// mysqlDialect is MariaDB: ? placeholders, backquoted names. (MySQL 8 has
// no SEQUENCE, SET STATEMENT or WAIT n, which its statements use.)
type mysqlDialect struct{}

func (mysqlDialect) quote(name string) (string, error) {
	return dialect.QuoteIdent(sqllock.MariaDB, name)
}

func (mysqlDialect) placeholder(int) string { return "?" }

func (mysqlDialect) tokenQuery() string { return `SELECT NEXTVAL(sqllock_fence_seq)` }

// schema: varbinary, so keys compare byte for byte, not by a collation
// that ignores case and trailing spaces.
func (mysqlDialect) schema(t string) string {
	return `CREATE TABLE ` + t + ` (
    lock_key varbinary(255) NOT NULL PRIMARY KEY,
    token    bigint         NOT NULL DEFAULT 0
) ENGINE=InnoDB;`
}

// A blocking locking read waits at most 5 seconds (WAIT 5). A blocked
// Acquire repeats it until its context ends, so the context, not
// innodb_lock_wait_timeout, bounds the wait; and a wait orphaned by a
// cancel that could not reach the server ends within this bound.
//
// The holder's life is when the server started, in Unix seconds: exact, as
// UNIX_TIMESTAMP() and Uptime both read the statement's start. Not the
// start-time field of UUID_SHORT(), which its 24-bit counter carries into
// once per 2^24 calls server-wide, so that it drifts later than the start.

// The prepared statements, by their index in mysqlStore.prepared.
const (
	myLockNoWait = iota
	myLockWait
	myShareNoWait
	myShareWait
)

// mysqlStore takes a row lock with a locking read that draws the token in
// its select list (InnoDB locks the row before the select list is
// evaluated, so the token is drawn while held). A missing row is created
// outside the attempt's transaction. The holder is the connection's id and
// the server's start, read once per connection.
type mysqlStore struct {
	env      storeEnv
	prepared []string // by myLockNoWait...
	// ensure creates a missing row in its own autocommit statement
	// without waiting on a held one.
	ensure       string
	sessionQuery string
	aliveQuery   string
	sessions     sessionCache
	noSharedTry  bool // no NOWAIT shared read: TryAcquireShared refused
}

func (mysqlDialect) newStore(t string, env storeEnv) store {
	return &mysqlStore{
		env: env,
		prepared: []string{
			myLockNoWait:  `SELECT NEXTVAL(sqllock_fence_seq) FROM ` + t + ` WHERE lock_key = ? FOR UPDATE NOWAIT`,
			myLockWait:    `SELECT NEXTVAL(sqllock_fence_seq) FROM ` + t + ` WHERE lock_key = ? FOR UPDATE WAIT 5`,
			myShareNoWait: `SELECT NEXTVAL(sqllock_fence_seq) FROM ` + t + ` WHERE lock_key = ? LOCK IN SHARE MODE NOWAIT`,
			myShareWait:   `SELECT NEXTVAL(sqllock_fence_seq) FROM ` + t + ` WHERE lock_key = ? LOCK IN SHARE MODE WAIT 5`,
		},
		ensure: `SET STATEMENT innodb_lock_wait_timeout = 0 FOR INSERT IGNORE INTO ` + t + ` (lock_key) VALUES (?)`,
		sessionQuery: `SELECT CONNECTION_ID(), UNIX_TIMESTAMP() - CAST((SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS
  WHERE VARIABLE_NAME = 'Uptime') AS SIGNED)`,
		aliveQuery: `SELECT ID, UNIX_TIMESTAMP() - CAST((SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS
  WHERE VARIABLE_NAME = 'Uptime') AS SIGNED)
FROM information_schema.PROCESSLIST WHERE FIND_IN_SET(ID, ?) > 0`,
	}
}

func (s *mysqlStore) queries() []string { return s.prepared }

// session returns the connection's id and the server's start, read once
// per connection: a connection lives within one server life. The id is
// the session a cancelled blocking Acquire kills; id and start together
// tell the monitor a lease's session from a later one with a reused id.
// It runs before the transaction, whose first statement stays the locking
// read.
func (s *mysqlStore) session(ctx context.Context, conn *sql.Conn) (holder, error) {
	return s.sessions.get(conn, func() (h holder, err error) {
		err = conn.QueryRowContext(ctx, s.sessionQuery).Scan(&h.session, &h.life)
		return h, err
	})
}

func (s *mysqlStore) lock(ctx context.Context, a *attempt, key string, wait bool) (g grant, retry bool, err error) {
	g.holder = a.holder
	noWait, blocking := myLockNoWait, myLockWait
	if a.shared {
		noWait, blocking = myShareNoWait, myShareWait
		if s.noSharedTry && !wait {
			return grant{}, false, fmt.Errorf("%w: no NOWAIT shared locking read common to MySQL 8 and MariaDB; use the MariaDB dialect on MariaDB, or AcquireShared with a deadline", sqllock.ErrUnsupported)
		}
	}
	if wait {
		err = s.wait(ctx, a, key, blocking, &g.token)
		if cerr := ctxend.Err(ctx); cerr != nil {
			// The kill may be on its way to this session: the Locker
			// discards the connection.
			return grant{}, false, cerr
		}
	} else {
		err = a.stmt(ctx, noWait).QueryRowContext(ctx, key).Scan(&g.token)
	}
	switch {
	case err == nil:
		return g, false, nil
	case errors.Is(err, sql.ErrNoRows):
		return grant{}, true, s.ensureRow(ctx, a, key)
	case dberr.IsLockNotAvailable(err):
		return grant{}, false, errRefused
	}
	return grant{}, false, err
}

// wait waits in the server's queue for key's row, in bounded rounds, and
// reads the token into token. The driver gives up a cancelled query by
// closing its socket, which a session blocked on a row lock does not
// notice: when ctx ends, the session is killed on the server too.
func (s *mysqlStore) wait(ctx context.Context, a *attempt, key string, q int, token *int64) error {
	kill := func() {
		defer s.env.bg.Done()
		s.kill(a.holder.session)
	}
	s.env.bg.Add(1)
	stop := context.AfterFunc(ctx, kill)
	var err error
	for {
		err = a.stmt(ctx, q).QueryRowContext(ctx, key).Scan(token)
		if err == nil || !dberr.IsLockNotAvailable(err) || ctxend.Err(ctx) != nil {
			break
		}
		// One round of WAIT timed out (only the statement was rolled back);
		// queue again.
	}
	if stop() { // kill will not run
		if ctxend.Err(ctx) == nil {
			s.env.bg.Done()
		} else {
			// ctx ended, but stop won the race with AfterFunc's start.
			go kill()
		}
	}
	return err
}

// ensureRow ends the attempt's transaction (its locking read of a missing
// row took a gap lock, which would block other keys' inserts) and creates
// the row in its own statement. A lock-wait refusal means the row exists
// and is held: the next attempt waits for it properly.
func (s *mysqlStore) ensureRow(ctx context.Context, a *attempt, key string) error {
	_ = a.tx.Rollback()
	_, err := a.conn.ExecContext(ctx, s.ensure, key)
	if err != nil && !dberr.IsLockNotAvailable(err) {
		return err
	}
	return nil
}

// kill ends the session id, on whose socket the driver gave up. Killing
// the session rather than the query also catches a statement still on its
// way to the server when the kill arrives; the Locker discards the
// connection anyway.
func (s *mysqlStore) kill(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	_, _ = s.env.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
}

// alive looks each hold's connection id up in PROCESSLIST with the
// server's start, read the same way as the hold's: a connection id is not
// reused within one server life, and a restarted server started later,
// barring two starts within one second or a clock set back. (UUID_SHORT()'s
// start field drifts later once its counter carries: a lease's drifted
// life would stay alive past a restart. INNODB_TRX needs the PROCESS
// privilege and is a cache refreshed only once left unread for 0.1s, so it
// can hide a fresh lease or keep showing a dead one.)
func (s *mysqlStore) alive(ctx context.Context, held []holder) ([]bool, error) {
	rows, err := s.env.stmts.Query(ctx, s.env.db, s.aliveQuery, joinSessions(held))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	started := make(map[int64]int64, len(held)) // session id: server start
	for rows.Next() {
		var id, start int64
		if err := rows.Scan(&id, &start); err != nil {
			return nil, err
		}
		started[id] = start
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	alive := make([]bool, len(held))
	for i, h := range held {
		start, ok := started[h.session]
		alive[i] = ok && h.life >= start
	}
	return alive, nil
}

// gone asks alive: a session's holder is its id and the server's start.
func (s *mysqlStore) gone(ctx context.Context, sessions []holder) (bool, error) {
	alive, err := s.alive(ctx, sessions)
	return err == nil && !slices.Contains(alive, true), err
}
