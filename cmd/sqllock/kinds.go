package main

import (
	"context"
	"database/sql"
	"errors"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/holds"
)

// The kinds of hold `sqllock locks` shows, in the order it groups them;
// internal/holds lists them, for this command and the web page alike.
const (
	kindLock      = holds.Lock
	kindJob       = holds.Job
	kindSemaphore = holds.Semaphore
	kindRWLock    = holds.RWLock
	kindLeader    = holds.Leader
	kindAdvisory  = holds.Advisory
)

var allKinds = holds.Kinds

// parseKinds reads --kind: kinds separated by commas, singular or plural.
func parseKinds(v string) (map[string]bool, error) { return holds.ParseKinds(v) }

// lockRow is one line of `sqllock locks`; see holds.Row.
type lockRow = holds.Row

// holdSource is where `locks` reads the rows of the lock tables.
type holdSource struct{ *holds.Source }

// openSource opens the readers of every lock table the database has; with
// pooler, made for a transaction-pooling proxy.
func openSource(ctx context.Context, db *sql.DB, d sqllock.Dialect, lockTable string, pooler bool) (*holdSource, error) {
	s, err := holds.Open(ctx, db, d, lockTable, pooler)
	var ue *holds.UsageError
	switch {
	case errors.Is(err, holds.ErrNotLockTable):
		return nil, fail(exitUsage, "locks: %v", err)
	case errors.As(err, &ue):
		return nil, fail(exitUsage, "%v", err)
	case err != nil:
		return nil, err
	}
	return &holdSource{s}, nil
}

// list returns the rows of the lock tables of the kinds in want.
func (s *holdSource) list(ctx context.Context, want map[string]bool) ([]lockRow, error) {
	return s.List(ctx, want)
}

// advisoryLocks lists the advisory locks the server shows; see
// holds.AdvisoryLocks.
func advisoryLocks(ctx context.Context, db *sql.DB, d sqllock.Dialect, namespace string, names []string) ([]lockRow, []string, error) {
	return holds.AdvisoryLocks(ctx, db, d, namespace, names)
}

// auditRow is one line of `sqllock locks --audit`; see holds.AuditRow.
type auditRow = holds.AuditRow
