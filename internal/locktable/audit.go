package locktable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/identity"
)

// AuditTable is the audit trail migration 00009 creates; every lock table
// of a database writes its force releases there.
const AuditTable = "sqllock_audit"

// ActionForceRelease is the action an audited force release records.
const ActionForceRelease = "force-release"

// Audit says who forces a release and why.
type Audit struct {
	Operator string // the operator's hostname/pid
	Reason   string
}

// NoReason is the reason recorded when a force release gives none.
const NoReason = "(no reason given)"

// NewAudit is the audit record of a force release run by this process:
// its hostname/pid as operator, changed by opts.
func NewAudit[O ~func(*Audit)](opts ...O) Audit {
	a := Audit{Operator: identity.Host()}
	for _, o := range opts {
		o(&a)
	}
	if a.Reason == "" {
		a.Reason = NoReason
	}
	return a
}

// AuditEntry is one row of the audit trail.
type AuditEntry struct {
	ID       int64
	At       time.Time // on the database clock
	Action   string
	Table    string // the lock table, as its Table was opened
	Key      string
	Token    int64  // the holder freed
	Owner    string // the holder freed
	Host     string // the holder's hostname/pid
	Holds    int    // the holder's hold count when freed
	Operator string
	Reason   string
}

// auditList reads the trail, oldest first; the same text on every dialect.
const auditList = `SELECT id, at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason
FROM ` + AuditTable + ` ORDER BY id`

// ForceReleaseAudited is ForceRelease that also records, in the same
// transaction, the holder it frees (owner, host, token, holds) with a's
// operator and reason in the audit trail: the key is freed if and only if
// the record is written. A Reason is required.
func (t *Table) ForceReleaseAudited(ctx context.Context, key string, token int64, a Audit) (bool, error) {
	if err := sqllock.ValidateKey(key); err != nil {
		return false, err
	}
	switch {
	case token <= 0:
		return false, fmt.Errorf("%w: token %d names no holder (tokens start at 1)", sqllock.ErrInvalidOption, token)
	case a.Reason == "":
		return false, fmt.Errorf("%w: a force release of %q needs a reason for the audit trail", sqllock.ErrInvalidOption, key)
	case a.Operator == "":
		return false, fmt.Errorf("%w: a force release of %q needs the operator for the audit trail", sqllock.ErrInvalidOption, key)
	}
	freed, err := t.forceAudited(ctx, key, token, a)
	if err != nil || freed {
		return freed, err
	}
	return false, t.notHeld(ctx, key, token)
}

// forceAudited writes the audit row and frees the row in one transaction.
// The audit statement comes first: it is a write (SQLite takes its write
// lock there) and locks the holder's row (FOR UPDATE where the dialect has
// it), so the row it describes is the row the release frees.
func (t *Table) forceAudited(ctx context.Context, key string, token int64, a Audit) (freed bool, err error) {
	tx, err := t.h.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if !freed {
			_ = tx.Rollback()
		}
	}()
	n, err := t.st.audit(ctx, tx, key, token, t.cfg.Table, a)
	if err != nil {
		return false, fmt.Errorf("write the audit record (is migration 00009 applied?): %w", err)
	}
	if n == 0 {
		return false, nil
	}
	// MariaDB's INSERT ... SELECT may read the row before a racing force
	// release committed; the UPDATE sees it freed, and the record goes
	// with the rollback.
	if n, err = t.st.forceReleaseTx(ctx, tx, key, token); err != nil || n == 0 {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}

// notHeld explains a force release that found no holder under token: nil
// when key is free, an error matching sqllock.ErrNotHeld naming the holder
// when another has it.
func (t *Table) notHeld(ctx context.Context, key string, token int64) error {
	var current int64
	var owner, host string
	err := t.h.queryRow(ctx, t.st.sql().holder, []any{key}, &current, &owner, &host)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("nothing released (token %d does not hold it): %w", token, err)
	}
	return fmt.Errorf("%w: held under token %d now, not %d (owner %q, host %s); nothing released",
		sqllock.ErrNotHeld, current, token, owner, host)
}

// AuditLog returns the audit trail of db, oldest first: every lock
// table's entries.
func AuditLog(ctx context.Context, db *sql.DB) ([]AuditEntry, error) {
	rows, err := db.QueryContext(ctx, auditList)
	if err != nil {
		return nil, fmt.Errorf("read the audit trail (is migration 00009 applied?): %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at any
		if err := rows.Scan(&e.ID, &at, &e.Action, &e.Table, &e.Key, &e.Token, &e.Owner, &e.Host, &e.Holds, &e.Operator, &e.Reason); err != nil {
			return nil, err
		}
		e.At = dialect.ToTime(at)
		out = append(out, e)
	}
	return out, rows.Err()
}
