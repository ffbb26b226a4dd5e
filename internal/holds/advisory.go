package holds

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
)

// AdvisoryLocks lists the advisory locks held or awaited on the server, as
// far as the server shows them, and notes what it cannot see. names are
// keys the operator named (--key), matched against the server's lock ids
// and names in namespace.
//
//   - PostgreSQL: pg_locks, in this database. A key is a 64-bit hash of its
//     name (advisory.PostgresKey): shown as its id unless named.
//   - MariaDB: performance_schema.metadata_locks shows every GET_LOCK name
//     where performance_schema is on (it is off by default); otherwise
//     only the named keys can be asked about, with IS_USED_LOCK.
//   - SQLite has no advisory locks.
func AdvisoryLocks(ctx context.Context, db *sql.DB, d sqllock.Dialect, namespace string, names []string) ([]Row, []string, error) {
	switch d {
	case sqllock.Postgres:
		return pgAdvisory(ctx, db, namespace, names)
	case sqllock.MariaDB, sqllock.MySQL:
		return mysqlAdvisory(ctx, db, d, namespace, names)
	}
	return nil, nil, nil
}

func pgAdvisory(ctx context.Context, db *sql.DB, namespace string, names []string) ([]Row, []string, error) {
	byID := map[int64]string{}
	for _, n := range names {
		byID[advisory.PostgresKey(namespace, n)] = n
	}
	// A 64-bit key shows as classid (high 32 bits) and objid (low), with
	// objsubid 1; the shift wraps into the sign bit as the key did.
	rows, err := db.QueryContext(ctx, `SELECT (l.classid::bigint << 32) | l.objid::bigint, l.pid, l.mode, l.granted,
       COALESCE(a.application_name, ''), COALESCE(host(a.client_addr), 'local'), a.state_change
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY 1, 4 DESC, 2`)
	if err != nil {
		return nil, nil, fmt.Errorf("reading pg_locks: %w", err)
	}
	defer rows.Close()
	var out []Row
	unnamed := 0
	for rows.Next() {
		var id, pid int64
		var mode, app, host string
		var granted bool
		var since sql.NullTime
		if err := rows.Scan(&id, &pid, &mode, &granted, &app, &host, &since); err != nil {
			return nil, nil, err
		}
		key, ok := byID[id]
		if !ok {
			key = "id " + strconv.FormatInt(id, 10)
			unnamed++
		}
		state := "held"
		if !granted {
			state = "waiting"
		}
		if mode == "ShareLock" {
			state += " (shared)"
		}
		owner := "pid " + strconv.FormatInt(pid, 10)
		if app != "" {
			owner += " " + app
		}
		out = append(out, Row{Kind: "advisory", Key: key, Owner: owner, Host: host, State: state})
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	var notes []string
	if unnamed > 0 {
		notes = append(notes, fmt.Sprintf("advisory locks show as 64-bit ids (hashes of %q-namespaced keys): name keys with --key to match them", namespace))
	}
	return out, notes, nil
}

func mysqlAdvisory(ctx context.Context, db *sql.DB, d sqllock.Dialect, namespace string, names []string) ([]Row, []string, error) {
	var ps int
	if err := db.QueryRowContext(ctx, `SELECT @@performance_schema`).Scan(&ps); err != nil {
		return nil, nil, fmt.Errorf("reading @@performance_schema: %w", err)
	}
	// Both paths name a key's lock MySQLName.
	byName := map[string]string{}
	for _, n := range names {
		byName[advisory.MySQLName(namespace, n)] = n
	}
	if ps == 1 {
		rows, err := psAdvisory(ctx, db, namespace, byName)
		if err == nil {
			return rows, nil, nil
		}
		// The instrument or the table may be unavailable: fall back.
	}
	var out []Row
	for name, key := range byName {
		var id sql.NullInt64
		if err := db.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?)`, name).Scan(&id); err != nil {
			return nil, nil, fmt.Errorf("IS_USED_LOCK(%q): %w", name, err)
		}
		if id.Valid {
			out = append(out, Row{Kind: "advisory", Key: key, Owner: "connection " + strconv.FormatInt(id.Int64, 10), State: "held"})
		}
	}
	note := "advisory locks: performance_schema is off on this server, so only keys named with --key are looked up (IS_USED_LOCK); start the server with performance_schema=ON to list them all"
	if len(names) > 0 {
		note = "advisory locks: performance_schema is off on this server: only the keys named with --key were looked up (IS_USED_LOCK)"
	}
	return out, []string{note}, nil
}

// psAdvisory reads every GET_LOCK of the server from performance_schema.
func psAdvisory(ctx context.Context, db *sql.DB, namespace string, byName map[string]string) ([]Row, error) {
	rows, err := db.QueryContext(ctx, `SELECT m.OBJECT_NAME, m.LOCK_STATUS, COALESCE(t.PROCESSLIST_ID, 0), COALESCE(t.PROCESSLIST_HOST, '')
FROM performance_schema.metadata_locks m
LEFT JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID
WHERE m.OBJECT_TYPE = 'USER LEVEL LOCK'
ORDER BY 1, 2`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var name, status, host string
		var id int64
		if err := rows.Scan(&name, &status, &id, &host); err != nil {
			return nil, err
		}
		key := name
		if k, ok := byName[name]; ok {
			key = k
		} else if k, ok := strings.CutPrefix(name, namespace+":"); ok {
			key = k // a long key shows as its prefix, "~" and a hash
		}
		state := "held"
		if status != "GRANTED" {
			state = "waiting"
		}
		out = append(out, Row{Kind: "advisory", Key: key, Owner: "connection " + strconv.FormatInt(id, 10), Host: host, State: state})
	}
	return out, rows.Err()
}
