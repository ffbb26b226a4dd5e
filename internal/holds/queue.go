package holds

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/semaphore"
)

// Wait is one waiter for a held key, as far as the database shows it,
// named as List names the key's row.
type Wait struct {
	Kind, Key     string
	Table, RowKey string
	// ID tells the waiter apart from the key's others while it waits: a
	// PostgreSQL queue entry's Locker id, a MariaDB gate waiter's
	// connection. "": a waiter that could not queue and only marked the
	// row wanted (behind a pooler, or a full queue): one or more, uncounted.
	ID string
	// Owner and Host: a fair waiter's, which a grant would name; "" else.
	Owner, Host string
}

// Waits lists the waiters of the held rows of every lock table, where the
// dialect keeps them. PostgreSQL keeps a queue in each row (migration
// 00016: the Lockers that were refused and still wait, in order, one entry
// per Locker however many of its calls wait): one statement reads every
// table's. The other dialects keep none: it returns nil and sends nothing
// (MariaDB's gate waiters are read from the advisory listing: GateWaits).
func (s *Source) Waits(ctx context.Context) ([]Wait, error) {
	if !dialect.Of(s.Dialect).QueuedWaiters {
		return nil, nil
	}
	tables := []string{s.LockTable}
	if s.jobs != nil {
		tables = append(tables, jobguard.DefaultTable)
	}
	if s.permits != nil {
		tables = append(tables, semaphore.DefaultTable)
	}
	var parts []string
	args := make([]any, len(tables))
	for i, t := range tables {
		q, err := dialect.QuoteIdent(s.Dialect, t)
		if err != nil {
			return nil, err
		}
		args[i] = t
		// A row with no entry but the wanted mark still gives one line.
		parts = append(parts, fmt.Sprintf(`SELECT $%d::text, t.lock_key::text, COALESCE(w.caller, ''), COALESCE(w.owner, ''), COALESCE(w.host, ''), w.n
FROM %s t LEFT JOIN LATERAL unnest(t.waiters) WITH ORDINALITY AS w(caller, claim_us, owner, host, n) ON true
WHERE t.expires_at > now() AND (t.wanted OR cardinality(t.waiters) > 0)`, i+1, q))
	}
	rows, err := s.DB.QueryContext(ctx, strings.Join(parts, "\nUNION ALL\n")+"\nORDER BY 1, 2, 6", args...)
	if err != nil {
		return nil, fmt.Errorf("reading the lock tables' queues: %w", err)
	}
	defer rows.Close()
	var out []Wait
	for rows.Next() {
		var w Wait
		var n sql.NullInt64
		if err := rows.Scan(&w.Table, &w.RowKey, &w.ID, &w.Owner, &w.Host, &n); err != nil {
			return nil, err
		}
		name := Decode(w.Table, s.LockTable, w.RowKey)
		w.Kind, w.Key = name.Kind, name.Name
		out = append(out, w)
	}
	return out, rows.Err()
}

// GateWaits names the MariaDB gate waiters among adv (the advisory listing
// of performance_schema): a Locker refused a key waits on its gate, a
// named lock whose name hashes the table and the key (locktable.GateName),
// so a waiter can be matched to a key the listing rows hold, never read
// back from the name. It sends no statement.
func GateWaits(rows, adv []Row) []Wait {
	byGate := map[string]Row{}
	for _, r := range rows {
		if r.Table != "" {
			byGate[locktable.GateName(r.Table, r.RowKey)] = r
		}
	}
	var out []Wait
	for _, a := range adv {
		r, ok := byGate[a.Key]
		if !ok || !strings.HasPrefix(a.State, "waiting") {
			continue
		}
		out = append(out, Wait{Kind: r.Kind, Key: r.Key, Table: r.Table, RowKey: r.RowKey, ID: a.Owner})
	}
	return out
}
