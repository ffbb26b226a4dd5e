package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// The kinds of hold `sqllock locks` shows, in the order it groups them.
const (
	kindLock      = "lock"
	kindJob       = "job"
	kindSemaphore = "semaphore"
	kindRWLock    = "rwlock"
	kindLeader    = "leader"
	kindAdvisory  = "advisory"
)

var allKinds = []string{kindLock, kindJob, kindSemaphore, kindRWLock, kindLeader, kindAdvisory}

// parseKinds reads --kind: kinds separated by commas, singular or plural.
func parseKinds(v string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, k := range strings.Split(v, ",") {
		k = strings.ToLower(strings.TrimSpace(k))
		if k != kindAdvisory {
			k = strings.TrimSuffix(k, "s")
		}
		if !slices.Contains(allKinds, k) {
			return nil, fmt.Errorf("--kind %q: want one or more of locks, jobs, semaphores, rwlocks, leaders, advisory, separated by commas", v)
		}
		out[k] = true
	}
	return out, nil
}

// rwSep starts the suffix rwlock gives its rows' keys in the permit
// table: key+rwSep+"w" is the writers' gate, key+rwSep+"r"+N reader row N.
const rwSep = "\x1frw:"

// rowName is what a row of a lock table stands for, in the names its
// primitive's users know.
type rowName struct {
	kind string
	name string // the key, job or election name as the application gave it
	slot int    // a semaphore's permit slot, an rwlock's reader row; -1: none
}

// decodeRow names the row key of table as the primitive that wrote it
// does. It is the one place that knows how they name their rows:
//
//   - the tablelock table: a lock, or an election's leadership under
//     election.KeyPrefix + name (in tablelock.DefaultTable only);
//   - the job table: a job, by its name;
//   - the permit table: an rwlock's gate (key rwSep "w") or reader row
//     (key rwSep "r" N), else a semaphore's permit slot (key "#" N).
func decodeRow(table, lockTable, key string) rowName {
	switch table {
	case jobguard.DefaultTable:
		return rowName{kindJob, key, -1}
	case semaphore.DefaultTable:
		if i := strings.LastIndex(key, rwSep); i >= 0 {
			name, part := key[:i], key[i+len(rwSep):]
			if part == "w" {
				return rowName{kindRWLock, name, -1}
			}
			if n, err := strconv.Atoi(strings.TrimPrefix(part, "r")); err == nil && strings.HasPrefix(part, "r") {
				return rowName{kindRWLock, name, n}
			}
		}
		if i := strings.LastIndexByte(key, '#'); i >= 0 {
			if n, err := strconv.Atoi(key[i+1:]); err == nil {
				return rowName{kindSemaphore, key[:i], n}
			}
		}
		return rowName{kindSemaphore, key, -1}
	}
	if name, ok := strings.CutPrefix(key, election.KeyPrefix); ok && table == tablelock.DefaultTable && lockTable == tablelock.DefaultTable {
		return rowName{kindLeader, name, -1}
	}
	return rowName{kindLock, key, -1}
}

// part says which of a name's rows r is, for messages and the audit
// trail: "permit 2", "reader 0", "writer"; "" for a row per name.
func (r rowName) part() string {
	switch {
	case r.kind == kindSemaphore && r.slot >= 0:
		return "permit " + strconv.Itoa(r.slot)
	case r.kind == kindRWLock && r.slot >= 0:
		return "reader " + strconv.Itoa(r.slot)
	case r.kind == kindRWLock:
		return "writer"
	}
	return ""
}

// holdSource is where `locks` reads the rows of the lock tables.
type holdSource struct {
	db        *sql.DB
	d         sqllock.Dialect
	lockTable string            // --table
	locks     *tablelock.Locker // lockTable's
	jobs      *tablelock.Locker // the job table's (the lock table's shape); nil: none
	permits   *tablelock.Locker // the permit table's; nil: none
	elections *election.Election
}

// openSource opens the readers of every lock table the database has; with
// pooler, made for a transaction-pooling proxy.
func openSource(ctx context.Context, db *sql.DB, d sqllock.Dialect, lockTable string, pooler bool) (*holdSource, error) {
	if lockTable == semaphore.DefaultTable || lockTable == jobguard.DefaultTable || lockTable == election.Table {
		return nil, fail(exitUsage, "locks: --table %s: --table names a tablelock table; permits, rwlock holds, jobs and leaders are listed by default (choose with --kind)", lockTable)
	}
	s := &holdSource{db: db, d: d, lockTable: lockTable}
	opts := func(table string) []tablelock.Option {
		o := []tablelock.Option{tablelock.WithTable(table), tablelock.WithNotify(false)}
		if pooler {
			o = append(o, tablelock.WithTransactionPooler())
		}
		return o
	}
	var err error
	if s.locks, err = tablelock.New(db, d, opts(lockTable)...); err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	// A database migrated before a primitive shipped has no table of it.
	if ok, err := tableExists(ctx, db, d, jobguard.DefaultTable); err != nil {
		s.Close()
		return nil, err
	} else if ok {
		if s.jobs, err = tablelock.New(db, d, opts(jobguard.DefaultTable)...); err != nil {
			s.Close()
			return nil, err
		}
	}
	ok, err := tableExists(ctx, db, d, semaphore.DefaultTable)
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

// Close closes the readers; never the database.
func (s *holdSource) Close() {
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

// locker returns the Locker of table, for a force release.
func (s *holdSource) locker(table string) *tablelock.Locker {
	switch table {
	case semaphore.DefaultTable:
		return s.permits
	case jobguard.DefaultTable:
		return s.jobs
	}
	return s.locks
}

// list returns the rows of the lock tables of the kinds in want, each
// named as its primitive's users know it.
func (s *holdSource) list(ctx context.Context, want map[string]bool) ([]lockRow, error) {
	var rows []lockRow
	add := func(table string, infos []tablelock.Info) {
		for _, in := range infos {
			n := decodeRow(table, s.lockTable, in.Key)
			if !want[n.kind] {
				continue
			}
			r := lockRow{Kind: n.kind, Key: n.name, Owner: in.Owner, Host: in.Host, Holds: in.Holds, Token: in.Token,
				Acquired: in.AcquiredAt, Expires: in.ExpiresAt, HeldForMS: in.HeldFor.Milliseconds(),
				table: table, rowKey: in.Key, slot: n.slot}
			if n.slot >= 0 {
				slot := n.slot
				r.Slot = &slot
			}
			rows = append(rows, r)
		}
	}
	if want[kindLock] || want[kindLeader] {
		infos, err := s.locks.List(ctx)
		if err != nil {
			return nil, err
		}
		add(s.lockTable, infos)
	}
	if s.jobs != nil && want[kindJob] {
		infos, err := s.jobs.List(ctx)
		if err != nil {
			return nil, err
		}
		add(jobguard.DefaultTable, infos)
	}
	if s.permits != nil && (want[kindSemaphore] || want[kindRWLock]) {
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
		case r.Kind == kindSemaphore:
			held[r.Key]++
		case r.Kind == kindRWLock && r.slot >= 0:
			readers[r.Key]++
		case r.Kind == kindRWLock:
			gate[r.Key] = true
		}
	}
	for i := range rows {
		r := &rows[i]
		switch r.Kind {
		case kindJob:
			r.State = "done (hold-at-least)"
			if r.Holds > 0 {
				r.State = "running"
			}
		case kindSemaphore:
			r.Held = held[r.Key]
			r.State = "held"
		case kindRWLock:
			r.Readers = readers[r.Key]
			r.WriterWaiting = gate[r.Key] && r.Readers > 0
			switch {
			case r.slot >= 0:
				r.State = "read"
			case r.WriterWaiting:
				r.State = "writer waiting"
			default:
				r.State = "write"
			}
		case kindLeader:
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
	slices.SortStableFunc(rows, func(a, b lockRow) int {
		return slices.Index(allKinds, a.Kind) - slices.Index(allKinds, b.Kind)
	})
	return rows, nil
}
