package holds

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Waiter is a session the server shows waiting for a lock.
type Waiter struct {
	PID       int64
	App, Host string
	Waiting   time.Duration
	BlockedBy string
	Query     string
}

// PGWaiters lists the sessions of this PostgreSQL database blocked on a
// heavyweight lock (row locks, advisory locks), with the sessions that
// block them. One statement.
func PGWaiters(ctx context.Context, db *sql.DB) ([]Waiter, error) {
	rows, err := db.QueryContext(ctx, `SELECT pid, COALESCE(application_name, ''), COALESCE(host(client_addr), 'local'),
       EXTRACT(EPOCH FROM clock_timestamp() - COALESCE(state_change, query_start, clock_timestamp()))::float8,
       pg_blocking_pids(pid)::text, left(regexp_replace(query, '\s+', ' ', 'g'), 80)
FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
ORDER BY 4 DESC`)
	if err != nil {
		return nil, fmt.Errorf("reading pg_stat_activity: %w", err)
	}
	defer rows.Close()
	var out []Waiter
	for rows.Next() {
		var x Waiter
		var secs float64
		var blockers string
		if err := rows.Scan(&x.PID, &x.App, &x.Host, &secs, &blockers, &x.Query); err != nil {
			return nil, err
		}
		x.Waiting = time.Duration(secs * float64(time.Second))
		x.BlockedBy = "pid " + strings.Trim(blockers, "{}")
		out = append(out, x)
	}
	return out, rows.Err()
}

// PGListeners counts the PostgreSQL sessions whose last statement was a
// LISTEN on channel: tablelock Lockers with an Acquire waiting keep one
// open. One statement.
func PGListeners(ctx context.Context, db *sql.DB, channel string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN %' AND position($1 in query) > 0`,
		strconv.Quote(channel)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("reading pg_stat_activity: %w", err)
	}
	return n, nil
}
