// Package shop is the table of sqllock's stock demo, sqllock_demo_stock:
// its schema and rows, which the demo sells from and bench's optimistic
// case writes to.
package shop

import (
	"context"
	"database/sql"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/optimistic"
)

// Table is the demo table's name.
const Table = "sqllock_demo_stock"

// Row is a row of the demo table as optimistic reads and writes it.
type Row struct {
	Item    string `db:"item"`
	Units   int    `db:"units"`
	Version int64  `db:"version"`
}

// CreateTable makes the demo's table; each run uses its own item rows.
func CreateTable(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sqllock_demo_stock (
	item    varchar(200) NOT NULL PRIMARY KEY,
	units   integer      NOT NULL,
	version bigint       NOT NULL DEFAULT 0
)`)
	if err != nil || hasVersion(ctx, db) {
		return err
	}
	// A table made by an earlier sqllock has no version column.
	_, err = db.ExecContext(ctx, `ALTER TABLE sqllock_demo_stock ADD COLUMN version bigint NOT NULL DEFAULT 0`)
	if err != nil && hasVersion(ctx, db) {
		return nil // another sqllock added it first
	}
	return err
}

func hasVersion(ctx context.Context, db *sql.DB) bool {
	rows, err := db.QueryContext(ctx, `SELECT version FROM sqllock_demo_stock WHERE 1 = 0`)
	if err != nil {
		return false
	}
	rows.Close()
	return true
}

// InsertRow adds an item to the demo table.
func InsertRow(ctx context.Context, db *sql.DB, d sqllock.Dialect, item string, units int) error {
	q := `INSERT INTO sqllock_demo_stock (item, units) VALUES (?, ?)`
	if dialect.Of(d).NumberedParams {
		q = `INSERT INTO sqllock_demo_stock (item, units) VALUES ($1, $2)`
	}
	_, err := db.ExecContext(ctx, q, item, units)
	return err
}

// DeleteRow drops an item of the demo table.
func DeleteRow(ctx context.Context, db *sql.DB, d sqllock.Dialect, item string) error {
	q := `DELETE FROM sqllock_demo_stock WHERE item = ?`
	if dialect.Of(d).NumberedParams {
		q = `DELETE FROM sqllock_demo_stock WHERE item = $1`
	}
	_, err := db.ExecContext(ctx, q, item)
	return err
}

// CASPolicy is optimistic's default backoff with far more attempts than
// its default 20: a buyer that gives up after a few lost races is a lost
// sale, and the demo counts the retries instead. The cap only stops a
// livelock.
var CASPolicy = optimistic.LimitAttempts(optimistic.ExponentialBackoff(optimistic.DefaultMinBackoff, optimistic.DefaultMaxBackoff), 1000)

// Retries is the attempts a call repeated.
func Retries(st optimistic.Stats) int { return max(st.Attempts-1, 0) }
