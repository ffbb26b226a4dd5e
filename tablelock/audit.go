package tablelock

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/internal/locktable"
)

// ForceOption adds to the audit record of a force release
// ([Locker.ForceRelease], and jobguard's).
type ForceOption func(*locktable.Audit)

// Reason records why the operator forced the release (an incident, a
// ticket). The sqllock command requires one.
func Reason(text string) ForceOption {
	return func(a *locktable.Audit) { a.Reason = text }
}

// Operator records who forced the release, beside the hostname/pid of the
// process that ran it (for a tool acting on a person's behalf).
func Operator(name string) ForceOption {
	return func(a *locktable.Audit) { a.Operator = name + " at " + a.Operator }
}

// NoReason is the reason recorded when a force release gives none.
const NoReason = locktable.NoReason

// AuditEntry is one record of the audit trail: a force release, the
// holder it freed, who forced it and why.
type AuditEntry struct {
	ID       int64
	At       time.Time // on the database clock, UTC
	Action   string    // "force-release"
	Table    string    // the lock table: sqllock_locks, sqllock_jobs, ...
	Key      string
	Token    int64  // the holder freed
	Owner    string // the holder freed ("" for a job only kept by its hold-at-least)
	Host     string // the holder's hostname/pid
	Holds    int    // the holder's hold count when freed
	Operator string // the hostname/pid of the process that forced it
	Reason   string
}

// AuditLog returns db's audit trail (the table sqllock_audit, migration
// 00009), oldest first: the force releases of every lock table and job
// table of the database.
func AuditLog(ctx context.Context, db *sql.DB) ([]AuditEntry, error) {
	rows, err := locktable.AuditLog(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("tablelock: audit log: %w", err)
	}
	out := make([]AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = AuditEntry(r)
	}
	return out, nil
}
