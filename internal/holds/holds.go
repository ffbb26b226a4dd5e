// Package holds lists every hold kept in a database's lock tables, named as
// the primitive that took it names it: tablelock locks, jobguard jobs,
// semaphore permits, rwlock holds, election leaders, and the advisory locks
// the server shows. `sqllock locks` prints what it returns and the web page
// (package sqlweb) renders it, so the two never disagree on what a row is.
//
// It is internal: its rows are an operator's view, free to change, not an
// API to keep.
package holds

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// The kinds of hold, in the order listings group them.
const (
	Lock      = "lock"
	Job       = "job"
	Semaphore = "semaphore"
	RWLock    = "rwlock"
	Leader    = "leader"
	Advisory  = "advisory"
)

// Kinds is every kind, in the order listings group them.
var Kinds = []string{Lock, Job, Semaphore, RWLock, Leader, Advisory}

// ParseKinds reads a list of kinds separated by commas, singular or plural.
func ParseKinds(v string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, k := range strings.Split(v, ",") {
		k = strings.ToLower(strings.TrimSpace(k))
		if k != Advisory {
			k = strings.TrimSuffix(k, "s")
		}
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("--kind %q: want one or more of locks, jobs, semaphores, rwlocks, leaders, advisory, separated by commas", v)
		}
		out[k] = true
	}
	return out, nil
}

// All returns a set of every kind.
func All() map[string]bool {
	out := map[string]bool{}
	for _, k := range Kinds {
		out[k] = true
	}
	return out
}

// Row is one hold: a tablelock lock, a jobguard job, a semaphore permit,
// an rwlock hold, an election's leadership, or an advisory lock as the
// server shows it (no token, no times: those the server does not keep).
// Key is the name the application gave: a semaphore's or rwlock's key
// without the row's suffix, an election's name. Its JSON is what
// `sqllock locks --json` prints.
type Row struct {
	Kind      string    `json:"kind"` // lock, job, semaphore, rwlock, leader or advisory
	Key       string    `json:"key"`
	Owner     string    `json:"owner"` // advisory: the session
	Host      string    `json:"host"`
	Holds     int       `json:"holds,omitempty"`
	Token     int64     `json:"token,omitempty"`
	Acquired  time.Time `json:"acquired,omitzero"`
	Expires   time.Time `json:"expires,omitzero"`
	HeldForMS int64     `json:"held_for_ms,omitempty"`
	// State: a job's "running" or "done (hold-at-least)"; an rwlock row's
	// "read", "write" or "writer waiting"; advisory "held" or "waiting",
	// "(shared)".
	State string `json:"state,omitempty"`
	// Slot: a semaphore permit's slot, an rwlock reader's row, from 0.
	Slot *int `json:"slot,omitempty"`
	// Held: how many permits of the semaphore's key are held now.
	Held int `json:"held,omitempty"`
	// Of: how many permits the semaphore's key has, when the table says
	// (0: unknown).
	Of int `json:"of,omitempty"`
	// Readers: how many readers hold the rwlock's key now;
	// WriterWaiting: a writer holds its gate and waits for them.
	Readers       int  `json:"readers,omitempty"`
	WriterWaiting bool `json:"writer_waiting,omitempty"`
	// A leader's published value, term (its lease's token) and since.
	Value string    `json:"value,omitempty"`
	Term  int64     `json:"term,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// NextDue: when a job next fires, when the table says (zero: unknown).
	NextDue time.Time `json:"next_due,omitzero"`

	Table  string `json:"-"` // the lock table of the row; "" for advisory
	RowKey string `json:"-"` // the row's key in it
}

// Now is the database's clock when the row was read: acquired + held for.
func (r Row) Now() time.Time {
	return r.Acquired.Add(time.Duration(r.HeldForMS) * time.Millisecond)
}

// HeldFor is how long the row has been held, on the database's clock.
func (r Row) HeldFor() time.Duration { return time.Duration(r.HeldForMS) * time.Millisecond }

// ExpiresIn is how long the row has left, on the database's clock.
func (r Row) ExpiresIn() time.Duration { return r.Expires.Sub(r.Now()) }

// The texts the operator's views (`sqllock locks`, the web page) show for
// a row's columns, alike in both.

// SlotText is a semaphore permit's or rwlock reader's row, "-" for none.
func (r Row) SlotText() string {
	if r.Slot == nil {
		return "-"
	}
	return strconv.Itoa(*r.Slot)
}

// HeldText is how many permits of a semaphore's key are held: "2 of 3",
// or "2 permit(s)" where the table does not say how many there are.
func (r Row) HeldText() string {
	if r.Of > 0 {
		return fmt.Sprintf("%d of %d", r.Held, r.Of)
	}
	return fmt.Sprintf("%d permit(s)", r.Held)
}

// HoldText is an rwlock row's hold: "read (row 0)", "write".
func (r Row) HoldText() string {
	if r.Slot != nil {
		return r.State + " (row " + r.SlotText() + ")"
	}
	return r.State
}

// WriterWaitingText is "yes" when a writer waits for an rwlock's readers.
func (r Row) WriterWaitingText() string {
	if r.WriterWaiting {
		return "yes"
	}
	return "no"
}

// Part says which of a name's rows r is: "permit 2", "reader 0",
// "writer"; "" for a row per name.
func (r Row) Part() string {
	if r.Table == "" {
		return ""
	}
	return Decode(r.Table, "", r.RowKey).Part()
}

// RWSep starts the suffix rwlock gives its rows' keys in the permit
// table: key+RWSep+"w" is the writers' gate, key+RWSep+"r"+N reader row N.
const RWSep = "\x1frw:"

// Name is what a row of a lock table stands for, in the names its
// primitive's users know.
type Name struct {
	Kind string
	Name string // the key, job or election name as the application gave it
	Slot int    // a semaphore's permit slot, an rwlock's reader row; -1: none
}

// Decode names the row key of table as the primitive that wrote it does.
// lockTable is the tablelock table listed (elections live only in
// tablelock.DefaultTable). It is the one place that knows how they name
// their rows:
//
//   - the tablelock table: a lock, or an election's leadership under
//     election.KeyPrefix + name (in tablelock.DefaultTable only);
//   - the job table: a job, by its name;
//   - the permit table: an rwlock's gate (key RWSep "w") or reader row
//     (key RWSep "r" N), else a semaphore's permit slot (key "#" N).
func Decode(table, lockTable, key string) Name {
	switch table {
	case jobguard.DefaultTable:
		return Name{Job, key, -1}
	case semaphore.DefaultTable:
		if i := strings.LastIndex(key, RWSep); i >= 0 {
			name, part := key[:i], key[i+len(RWSep):]
			if part == "w" {
				return Name{RWLock, name, -1}
			}
			if n, err := strconv.Atoi(strings.TrimPrefix(part, "r")); err == nil && strings.HasPrefix(part, "r") {
				return Name{RWLock, name, n}
			}
		}
		if i := strings.LastIndexByte(key, '#'); i >= 0 {
			if n, err := strconv.Atoi(key[i+1:]); err == nil {
				return Name{Semaphore, key[:i], n}
			}
		}
		return Name{Semaphore, key, -1}
	}
	if name, ok := strings.CutPrefix(key, election.KeyPrefix); ok && table == tablelock.DefaultTable && lockTable == tablelock.DefaultTable {
		return Name{Leader, name, -1}
	}
	return Name{Lock, key, -1}
}

// Part says which of a name's rows n is, for messages and the audit
// trail: "permit 2", "reader 0", "writer"; "" for a row per name.
func (n Name) Part() string {
	switch {
	case n.Kind == Semaphore && n.Slot >= 0:
		return "permit " + strconv.Itoa(n.Slot)
	case n.Kind == RWLock && n.Slot >= 0:
		return "reader " + strconv.Itoa(n.Slot)
	case n.Kind == RWLock:
		return "writer"
	}
	return ""
}

// ErrNotLockTable is returned by Open for a lockTable that is another
// primitive's table.
var ErrNotLockTable = errors.New("names a tablelock table; permits, rwlock holds, jobs and leaders are listed by default (choose with --kind)")

// Source reads the rows of every lock table a database has.
type Source struct {
	DB        *sql.DB
	Dialect   sqllock.Dialect
	LockTable string            // the tablelock table listed
	locks     *tablelock.Locker // LockTable's
	jobs      *tablelock.Locker // the job table's (the lock table's shape); nil: none
	permits   *tablelock.Locker // the permit table's; nil: none
	elections *election.Election

	// AllDue makes List read the next due of every job the schedule
	// table holds, listed or not, into Due: the web page looks there for
	// firings that passed with no run. One statement at each List, jobs
	// or none.
	AllDue bool
	Due    map[string]time.Time
}

// Open opens the readers of every lock table db has; with pooler, made
// for a transaction-pooling proxy. Its statements: one to look for each
// of the job and permit tables.
func Open(ctx context.Context, db *sql.DB, d sqllock.Dialect, lockTable string, pooler bool) (*Source, error) {
	if lockTable == semaphore.DefaultTable || lockTable == jobguard.DefaultTable || lockTable == election.Table {
		return nil, fmt.Errorf("--table %s: %w", lockTable, ErrNotLockTable)
	}
	s := &Source{DB: db, Dialect: d, LockTable: lockTable}
	opts := func(table string) []tablelock.Option {
		o := []tablelock.Option{tablelock.WithTable(table), tablelock.WithNotify(false)}
		if pooler {
			o = append(o, tablelock.WithTransactionPooler())
		}
		return o
	}
	var err error
	if s.locks, err = tablelock.New(db, d, opts(lockTable)...); err != nil {
		return nil, &UsageError{err}
	}
	// A database migrated before a primitive shipped has no table of it.
	if ok, err := TableExists(ctx, db, d, jobguard.DefaultTable); err != nil {
		s.Close()
		return nil, err
	} else if ok {
		if s.jobs, err = tablelock.New(db, d, opts(jobguard.DefaultTable)...); err != nil {
			s.Close()
			return nil, err
		}
	}
	ok, err := TableExists(ctx, db, d, semaphore.DefaultTable)
	if err != nil {
		s.Close()
		return nil, err
	}
	if ok {
		if s.permits, err = tablelock.New(db, d, opts(semaphore.DefaultTable)...); err != nil {
			s.Close()
			return nil, err
		}
		if s.elections, err = election.New(db, d, opts(tablelock.DefaultTable)[1:]...); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// UsageError is an error of Open that the caller's options caused.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// tableExistsSQL counts the tables of the current schema named $1, on
// each dialect.
var tableExistsSQL = map[sqllock.Dialect]string{
	sqllock.Postgres: `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1`,
	sqllock.MariaDB:  `SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`,
	sqllock.MySQL:    `SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`,
	sqllock.SQLite:   `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`,
}

// TableExists reports whether the current schema has a table named name.
func TableExists(ctx context.Context, db *sql.DB, d sqllock.Dialect, name string) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, tableExistsSQL[d], name).Scan(&n)
	return n > 0, err
}

// Close closes the readers; never the database.
func (s *Source) Close() {
	if s.locks != nil {
		s.locks.Close()
	}
	if s.jobs != nil {
		s.jobs.Close()
	}
	if s.permits != nil {
		s.permits.Close()
	}
	if s.elections != nil {
		s.elections.Close()
	}
}

// Locker returns the Locker of table, for a force release.
func (s *Source) Locker(table string) *tablelock.Locker {
	switch table {
	case semaphore.DefaultTable:
		return s.permits
	case jobguard.DefaultTable:
		return s.jobs
	}
	return s.locks
}

// ForceRelease frees the holder r shows, not whoever holds its row by
// now, and records it with reason in the audit trail.
func (s *Source) ForceRelease(ctx context.Context, r Row, opts ...tablelock.ForceOption) (bool, error) {
	l := s.Locker(r.Table)
	if r.Table == "" || l == nil {
		return false, fmt.Errorf("%s %q cannot be forced from here", r.Kind, r.Key)
	}
	return l.ForceRelease(ctx, r.RowKey, r.Token, opts...)
}

// List returns the rows of the lock tables of the kinds in want (advisory
// aside: see Advisory), each named as its primitive's users know it,
// grouped by kind. Its statements: one per table listed, and one per
// leader shown.
func (s *Source) List(ctx context.Context, want map[string]bool) ([]Row, error) {
	var rows []Row
	add := func(table string, infos []tablelock.Info) {
		for _, in := range infos {
			n := Decode(table, s.LockTable, in.Key)
			if !want[n.Kind] {
				continue
			}
			r := Row{Kind: n.Kind, Key: n.Name, Owner: in.Owner, Host: in.Host, Holds: in.Holds, Token: in.Token,
				Acquired: in.AcquiredAt, Expires: in.ExpiresAt, HeldForMS: in.HeldFor.Milliseconds(),
				Table: table, RowKey: in.Key}
			if n.Slot >= 0 {
				slot := n.Slot
				r.Slot = &slot
			}
			rows = append(rows, r)
		}
	}
	if want[Lock] || want[Leader] {
		infos, err := s.locks.List(ctx)
		if err != nil {
			return nil, err
		}
		add(s.LockTable, infos)
	}
	if s.jobs != nil && want[Job] {
		infos, err := s.jobs.List(ctx)
		if err != nil {
			return nil, err
		}
		add(jobguard.DefaultTable, infos)
	}
	if s.permits != nil && (want[Semaphore] || want[RWLock]) {
		infos, err := s.permits.List(ctx)
		if err != nil {
			return nil, err
		}
		add(semaphore.DefaultTable, infos)
	}
	// What one row cannot say: how many permits of a key are held, how
	// many readers an rwlock has and whether a writer waits for them, the
	// leader's published value.
	held, readers, gate := map[string]int{}, map[string]int{}, map[string]bool{}
	for _, r := range rows {
		switch {
		case r.Kind == Semaphore:
			held[r.Key]++
		case r.Kind == RWLock && r.Slot != nil:
			readers[r.Key]++
		case r.Kind == RWLock:
			gate[r.Key] = true
		}
	}
	for i := range rows {
		r := &rows[i]
		switch r.Kind {
		case Job:
			r.State = "done (hold-at-least)"
			if r.Holds > 0 {
				r.State = "running"
			}
		case Semaphore:
			r.Held = held[r.Key]
			r.State = "held"
		case RWLock:
			r.Readers = readers[r.Key]
			r.WriterWaiting = gate[r.Key] && r.Readers > 0
			switch {
			case r.Slot != nil:
				r.State = "read"
			case r.WriterWaiting:
				r.State = "writer waiting"
			default:
				r.State = "write"
			}
		case Leader:
			if s.elections == nil {
				break
			}
			ld, err := s.elections.Leader(ctx, r.Key)
			switch {
			case errors.Is(err, election.ErrNoLeader):
				// Between the lease and its term row, or just ended.
			case err != nil:
				return nil, err
			case ld.Term == r.Token:
				r.Value, r.Term, r.Since = ld.Value, ld.Term, ld.Since
			}
			if r.Term == 0 {
				r.Term = r.Token
			}
		}
	}
	if err := s.addFacts(ctx, rows); err != nil {
		return nil, err
	}
	slices.SortStableFunc(rows, func(a, b Row) int {
		return slices.Index(Kinds, a.Kind) - slices.Index(Kinds, b.Kind)
	})
	return rows, nil
}

// AuditRow is one force release of the audit trail. Kind, Key and Part
// name the row as its primitive does; RowKey is the row's key in Table.
type AuditRow struct {
	ID       int64     `json:"id"`
	At       time.Time `json:"at"`
	Action   string    `json:"action"`
	Table    string    `json:"table"`
	Kind     string    `json:"kind"`
	Key      string    `json:"key"`
	Part     string    `json:"part,omitempty"` // "permit 2", "reader 0", "writer"
	RowKey   string    `json:"row_key"`
	Token    int64     `json:"token"`
	Owner    string    `json:"owner"`
	Host     string    `json:"host"`
	Holds    int       `json:"holds"`
	Operator string    `json:"operator"`
	Reason   string    `json:"reason"`
}

// Audit returns db's audit trail of force releases, oldest first, named
// as List names rows of lockTable. One statement.
func Audit(ctx context.Context, db *sql.DB, lockTable string) ([]AuditRow, error) {
	entries, err := tablelock.AuditLog(ctx, db)
	if err != nil {
		return nil, err
	}
	rows := make([]AuditRow, len(entries))
	for i, a := range entries {
		n := Decode(a.Table, lockTable, a.Key)
		rows[i] = AuditRow{ID: a.ID, At: a.At, Action: a.Action, Table: a.Table, Kind: n.Kind, Key: n.Name, Part: n.Part(),
			RowKey: a.Key, Token: a.Token, Owner: a.Owner, Host: a.Host, Holds: a.Holds, Operator: a.Operator, Reason: a.Reason}
	}
	return rows, nil
}
