package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
)

// Server is what DetectServer read from a MySQL-family server.
type Server struct {
	// Version is VERSION(), e.g. "8.4.3" or "10.11.6-MariaDB-log".
	Version string
	// Comment is @@version_comment, e.g. "MySQL Community Server - GPL".
	Comment string
	// MariaDB: the server is MariaDB, which has sequences and RETURNING.
	MariaDB bool
	// Galera: wsrep_on is ON (a Galera cluster node).
	Galera bool
	// ClusterSize is wsrep_cluster_size, the nodes a Galera node sees; 0
	// off Galera.
	ClusterSize int
}

// MultiWriter reports a Galera node in a cluster of more than one node:
// every node takes writes, and GET_LOCK, FOR UPDATE and AUTO_INCREMENT
// are each node's own.
func (s Server) MultiWriter() bool { return s.Galera && s.ClusterSize > 1 }

// Dialect is the path sqllock takes on this server: MariaDB on MariaDB,
// MySQL on MySQL and on Galera.
func (s Server) Dialect() Dialect {
	if s.MariaDB && !s.Galera {
		return MariaDB
	}
	return MySQL
}

var (
	servers   sync.Map // *sql.DB -> Server
	detecting sync.Map // *sql.DB -> *sync.Mutex: one detection at a time
)

// DetectServer reads the flavour and version of db's server (VERSION(),
// @@version_comment) and whether it is a Galera node, once per *sql.DB:
// the answer is kept for the handle's life. An error is not kept.
func DetectServer(ctx context.Context, db *sql.DB) (Server, error) {
	if s, ok := servers.Load(db); ok {
		return s.(Server), nil
	}
	// A burst of first acquires asks once, on one connection, not one
	// each on every connection of the pool.
	mu, _ := detecting.LoadOrStore(db, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if s, ok := servers.Load(db); ok {
		return s.(Server), nil
	}
	var s Server
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), @@version_comment").Scan(&s.Version, &s.Comment); err != nil {
		return Server{}, fmt.Errorf("sqllock: detect server: %w", err)
	}
	// MariaDB says so in its version (and its comment, unless packaged
	// under another name); MySQL never does.
	s.MariaDB = strings.Contains(strings.ToLower(s.Version+" "+s.Comment), "mariadb")
	// SHOW works on every server; @@wsrep_on is an error where there is no
	// such variable.
	on, err := showValue(ctx, db, "SHOW VARIABLES LIKE 'wsrep_on'")
	if err != nil {
		return Server{}, fmt.Errorf("sqllock: detect server: %w", err)
	}
	s.Galera = strings.EqualFold(on, "ON")
	if s.Galera {
		size, err := showValue(ctx, db, "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'")
		if err != nil {
			return Server{}, fmt.Errorf("sqllock: detect server: %w", err)
		}
		s.ClusterSize, _ = strconv.Atoi(size)
	}
	servers.Store(db, s)
	return s, nil
}

// showValue runs a SHOW ... LIKE statement and returns the Value of its
// row, "" when there is none.
func showValue(ctx context.Context, db *sql.DB, q string) (string, error) {
	var name, value string
	err := db.QueryRowContext(ctx, q).Scan(&name, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return value, err
}

// ServerDialect returns the dialect to pass the strategies for db: d
// itself, except that MariaDB becomes MySQL on a server that is not
// MariaDB (MySQL 8 lacks the statements of the MariaDB path) and on a
// Galera node (no sequences). Pass
// MySQL to take the MySQL path on MariaDB too.
func ServerDialect(ctx context.Context, db *sql.DB, d Dialect) (Dialect, error) {
	if !d.IsMySQL() {
		return d, nil
	}
	s, err := DetectServer(ctx, db)
	if err != nil {
		return 0, err
	}
	if d == MariaDB && (!s.MariaDB || s.Galera) {
		d = MySQL
	}
	return d, nil
}

var singleWriters sync.Map // *sql.DB -> struct{}

// DeclareSingleWriter declares that every lock statement sent through db
// reaches one node of a Galera cluster: a single-writer proxy (MaxScale's
// readwritesplit, ProxySQL or HAProxy with one active backend) or a DSN
// naming one node that no other locker writes to. The strategies then serve
// a multi-writer cluster; without it they refuse (CheckServer). The
// declaration is the caller's promise: sqllock cannot see the routing.
func DeclareSingleWriter(db *sql.DB) { singleWriters.Store(db, struct{}{}) }

// CheckServer returns nil when d's guarantees hold on db's server, and
// otherwise an error matching ErrUnsupported that says why and what to do.
// The strategies call it before their first statement on a MySQL-family
// server; it reads the server once per handle (DetectServer).
//
// On MariaDB outside Galera the MariaDB dialect first draws one token
// through sqllock_next_token() per handle, before the handle's first
// token: see catchUp.
//
// A Galera node of a multi-writer cluster is refused unless
// DeclareSingleWriter was called for db: GET_LOCK and FOR UPDATE are each
// node's own, so two nodes grant one key to two holders, and AUTO_INCREMENT
// tickets of different nodes are not in one order, so tokens would go back.
// Galera has no sequences either (CREATE SEQUENCE fails with error 1235):
// the MariaDB dialect is refused there for MySQL.
func CheckServer(ctx context.Context, db *sql.DB, d Dialect) error {
	if !d.IsMySQL() {
		return nil
	}
	s, err := DetectServer(ctx, db)
	if err != nil {
		if cerr := ctxend.Err(ctx); cerr != nil {
			return errors.Join(ErrNotAcquired, cerr)
		}
		return err
	}
	if s.Galera && d == MariaDB {
		return fmt.Errorf("%w: a Galera node has no sequences, which the MariaDB dialect needs: use sqllock.MySQL (sqllock.ServerDialect picks it)", ErrUnsupported)
	}
	switch {
	case d == MySQL:
		if err := checkTickets(ctx, db); err != nil {
			return err
		}
	case s.MariaDB:
		if err := catchUp(ctx, db); err != nil {
			return err
		}
	}
	if s.MultiWriter() {
		if _, ok := singleWriters.Load(db); !ok {
			return fmt.Errorf("%w: this is a multi-writer Galera cluster (wsrep_on, %d nodes): locks taken on one node do not exclude holders on another, and fencing tokens are not monotonic across nodes. "+
				"Route every lock statement to one node (a single-writer proxy, or one node's address) and declare it with sqllock.DeclareSingleWriter(db)", ErrUnsupported, s.ClusterSize)
		}
	}
	return nil
}

var ticketsFound sync.Map // *sql.DB -> struct{}: sqllock_next_token exists

// checkTickets makes sure migration 00010 ran before the MySQL path's
// first statement, which would otherwise fail on a function it cannot
// name. Only a success is kept: migrations may run later on the handle.
// information_schema shows a user only the routines it holds a privilege
// on, so a user without EXECUTE finds none either: the error says both.
func checkTickets(ctx context.Context, db *sql.DB) error {
	if _, ok := ticketsFound.Load(db); ok {
		return nil
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.ROUTINES
WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'sqllock_next_token'`).Scan(&n); err != nil {
		if cerr := ctxend.Err(ctx); cerr != nil {
			return errors.Join(ErrNotAcquired, cerr)
		}
		return fmt.Errorf("sqllock: looking for sqllock_next_token: %w", err)
	}
	if n == 0 {
		return errors.New("sqllock: the database has no sqllock_next_token() this user may execute, the MySQL path's token source: " +
			"run migrations.Up (or `sqllock migrate up`) to apply migration 00010, or GRANT EXECUTE ON FUNCTION sqllock_next_token to the user")
	}
	ticketsFound.Store(db, struct{}{})
	return nil
}

var (
	caughtUp   sync.Map // *sql.DB -> struct{}: catchUp succeeded
	catchingUp sync.Map // *sql.DB -> *sync.Mutex: one catch-up at a time
)

// catchUp draws one token through sqllock_next_token() before the MariaDB
// path's first token on db. Its statements draw NEXTVAL alone, and tickets
// can be ahead of the sequence: drawn on a Galera node the server has
// since left, or by 00010's function (a replica of an older release
// during the upgrade to 00015). Since 00015 the function draws NEXTVAL
// past a new ticket, so afterwards the sequence is above every ticket
// handed out before. Once per handle (one statement for its life), and
// only a success is kept. A user without EXECUTE on the function gets an
// error, not a lock whose token might go back.
func catchUp(ctx context.Context, db *sql.DB) error {
	if _, ok := caughtUp.Load(db); ok {
		return nil
	}
	mu, _ := catchingUp.LoadOrStore(db, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if _, ok := caughtUp.Load(db); ok {
		return nil
	}
	var tok int64
	if err := db.QueryRowContext(ctx, "SELECT sqllock_next_token()").Scan(&tok); err != nil {
		if cerr := ctxend.Err(ctx); cerr != nil {
			return errors.Join(ErrNotAcquired, cerr)
		}
		// A database migrated below 00010 has no MySQL path, so no token
		// of that path to rise above. Not kept: once migrated, the next
		// take catches up.
		if dberr.IsMissingRoutine(err) {
			return nil
		}
		return fmt.Errorf("sqllock: raising the sequence above the MySQL path's tokens with sqllock_next_token(): %w; "+
			"run migrations.Up (or `sqllock migrate up`) if the function is missing, and GRANT EXECUTE ON FUNCTION sqllock_next_token to the user: "+
			"the MariaDB path needs it too, or its tokens could go back after a move from the MySQL path or Galera", err)
	}
	caughtUp.Store(db, struct{}{})
	return nil
}
