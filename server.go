package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// DetectServer reads the flavour and version of db's server (VERSION(),
// @@version_comment) and whether it is a Galera node. It asks the server
// each time: it keeps nothing. The strategies' Lockers read their server
// once, at their first take, and keep the answer for their own life.
func DetectServer(ctx context.Context, db *sql.DB) (Server, error) {
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
