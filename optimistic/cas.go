package optimistic

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/stmtcache"
	"github.com/sqllock/sqllock/internal/telemetry"
)

// Table describes a table whose rows carry an integer version column. It
// builds the compare-and-swap statements for it; it holds no connection, so
// one Table serves any handle, a transaction included.
type Table struct {
	st                store
	name, id, version string   // as given, for errors
	qName, qID, qVer  string   // quoted
	updates           sync.Map // column list -> UPDATE text
	mappings          sync.Map // mappingKey -> *mapping or error
	// stmts is replaced, not closed for good, by Close: a Table is a
	// description, usable after Close.
	stmts      atomic.Pointer[stmtcache.Cache]
	direct     bool // WithTableTransactionPooler: every cache runs unprepared
	localQueue bool
	queues     rowQueues // Modify's in-process queues, one per row
	mp         metric.MeterProvider
	tel        *telemetry.T
}

// TableOption configures a Table.
type TableOption func(*Table)

// WithLocalQueue turns Modify's in-process queue on or off (default on).
// With it on, Modify calls of one process on the same row, through a pool
// handle (*sql.DB, *sqlx.DB), take turns: only writers in different
// processes still race, so a hot row does not collapse into retries. N
// goroutines racing one row waste about N reads and writes per success
// without it. Each row has a queue of its own, so writers of different rows
// never wait for each other, and a Modify called from another Modify's fn
// never waits for a queue at all (see Modify). It is never used for
// transactions or pinned connections, where waiting on a local queue while
// holding row locks could deadlock.
func WithLocalQueue(on bool) TableOption {
	return func(t *Table) { t.localQueue = on }
}

// WithTableTransactionPooler makes the Table's statements on a *sql.DB
// (or *sqlx.DB) run unprepared, for a transaction-pooling proxy, as
// [WithTransactionPooler] does for a Locker: before PgBouncer 1.21 a
// statement prepared on one turn of a server session is missing on the
// next, or collides with another client's of the same name.
func WithTableTransactionPooler() TableOption {
	return func(t *Table) { t.direct = true }
}

// newCache is an empty statement cache in t's mode.
func (t *Table) newCache() *stmtcache.Cache {
	return &stmtcache.Cache{Direct: t.direct}
}

// enterQueue waits for the turn on the queue of the row with key id and
// returns the function that gives it up; with no queue (a transaction, a
// pinned connection, queuing off) it returns a no-op at once.
func (t *Table) enterQueue(ctx context.Context, db any, id any) (leave func(), err error) {
	if !t.localQueue || !isPoolHandle(db) {
		return func() {}, nil
	}
	return t.queues.enter(ctx, queueKey(id))
}

// isPoolHandle reports a connection pool (*sql.DB, *sqlx.DB, or a wrapper
// of one): each statement takes any free connection and commits on its
// own.
func isPoolHandle(db any) bool {
	_, ok := db.(interface{ Driver() driver.Driver })
	return ok
}

// NewTable validates and quotes the table name (optionally
// schema-qualified), its key column and its version column. It does not
// touch the database; Check does.
func NewTable(d sqllock.Dialect, table, idColumn, versionColumn string, opts ...TableOption) (*Table, error) {
	st, err := storeFor(d)
	if err != nil {
		return nil, fmt.Errorf("optimistic: table: %w", err)
	}
	t := &Table{st: st, name: table, id: idColumn, version: versionColumn, localQueue: true}
	for _, o := range opts {
		o(t)
	}
	t.stmts.Store(t.newCache())
	t.tel = telemetry.New("optimistic", d.String(), telemetry.Options{MeterProvider: t.mp})
	if t.qName, err = st.quote(table); err != nil {
		return nil, fmt.Errorf("optimistic: table: %w", err)
	}
	if t.qID, err = quoteColumn(st, idColumn); err != nil {
		return nil, fmt.Errorf("optimistic: table %s: key column: %w", table, err)
	}
	if t.qVer, err = quoteColumn(st, versionColumn); err != nil {
		return nil, fmt.Errorf("optimistic: table %s: version column: %w", table, err)
	}
	if strings.EqualFold(idColumn, versionColumn) {
		return nil, fmt.Errorf("optimistic: table %s: %w: key and version column are both %q", table, sqllock.ErrInvalidOption, idColumn)
	}
	return t, nil
}

// quoteColumn quotes a bare column name: no schema dot allowed.
func quoteColumn(st store, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty column name", sqllock.ErrInvalidOption)
	}
	if strings.Contains(name, ".") {
		return "", fmt.Errorf("%w: column %q must not be qualified", sqllock.ErrInvalidOption, name)
	}
	return st.quote(name)
}

// Close closes the statements t prepared on *sql.DB and *sqlx.DB handles.
// It never closes a handle. A Table is usable after Close; it prepares
// again.
func (t *Table) Close() error {
	return t.stmts.Swap(t.newCache()).Close()
}

// Name is the table name as given to NewTable.
func (t *Table) Name() string { return t.name }

// Check reads no rows but makes the database resolve the table and both
// columns, so a missing version column is reported before any write.
func (t *Table) Check(ctx context.Context, db sqllock.Querier) error {
	q := "SELECT " + t.qID + ", " + t.qVer + " FROM " + t.qName + " WHERE 1 = 0"
	rows, err := db.QueryContext(ctx, q)
	if err == nil {
		for rows.Next() {
		}
		err = errors.Join(rows.Err(), rows.Close())
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("optimistic: table %s must have key column %q and integer version column %q: %w", t.name, t.id, t.version, err)
}

// Set is a column assignment for Update.
type Set struct {
	Column string
	Value  any
}

// Update writes the assignments to the row whose key is id, only if its
// version is still version, and bumps the version by one. It returns the
// new version, or an error matching sqllock.ErrConflict when no row matched:
// someone else wrote first (or the row is gone). Columns are validated and
// quoted; the key and version columns cannot be assigned.
//
// On a *sql.DB or *sqlx.DB the statement is prepared once per Table and
// connection, so MySQL does not pay a server-side prepare on every call.
func (t *Table) Update(ctx context.Context, db sqllock.Execer, id any, version int64, sets ...Set) (int64, error) {
	if len(sets) == 0 {
		return 0, fmt.Errorf("optimistic: update %s %v: %w: nothing to set", t.name, id, sqllock.ErrInvalidOption)
	}
	cols := make([]string, len(sets))
	args := make([]any, 0, len(sets)+2)
	for i, s := range sets {
		if strings.EqualFold(s.Column, t.id) || strings.EqualFold(s.Column, t.version) {
			return 0, fmt.Errorf("optimistic: update %s %v: %w: column %q is the key or the version", t.name, id, sqllock.ErrInvalidOption, s.Column)
		}
		cols[i] = s.Column
		args = append(args, s.Value)
	}
	q, err := t.updateQuery(cols)
	if err != nil {
		return 0, fmt.Errorf("optimistic: update %s %v: %w", t.name, id, err)
	}
	args = append(args, id, version)
	res, err := exec(ctx, t.stmts.Load(), db, q, args...)
	if err != nil {
		return 0, fmt.Errorf("optimistic: update %s %v: %w", t.name, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("optimistic: update %s %v: %w", t.name, id, err)
	}
	if n == 0 {
		t.tel.Conflict(ctx, "")
		return 0, fmt.Errorf("optimistic: update %s %v at version %d: %w", t.name, id, version, sqllock.ErrConflict)
	}
	return version + 1, nil
}

// updateQuery builds (once per column list) the guarded UPDATE. The version
// goes up by one in the same statement, so the row lock taken by the UPDATE
// makes compare and swap one atomic step on every dialect.
func (t *Table) updateQuery(cols []string) (string, error) {
	key := strings.Join(cols, "\x00")
	if q, ok := t.updates.Load(key); ok {
		return q.(string), nil
	}
	if dup := firstDup(cols); dup != "" {
		return "", fmt.Errorf("%w: column %q assigned twice", sqllock.ErrInvalidOption, dup)
	}
	var b strings.Builder
	b.WriteString("UPDATE " + t.qName + " SET ")
	for i, c := range cols {
		qc, err := quoteColumn(t.st, c)
		if err != nil {
			return "", err
		}
		b.WriteString(qc + " = " + t.ph(i+1) + ", ")
	}
	b.WriteString(t.qVer + " = " + t.qVer + " + 1 WHERE " + t.qID + " = " + t.ph(len(cols)+1) +
		" AND " + t.qVer + " = " + t.ph(len(cols)+2))
	q := b.String()
	t.updates.Store(key, q)
	return q, nil
}

func firstDup(cols []string) string {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = strings.ToLower(c)
	}
	slices.Sort(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return s[i]
		}
	}
	return ""
}

// ph is the i-th (1-based) placeholder.
func (t *Table) ph(i int) string { return t.st.ph(i) }
