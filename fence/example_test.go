package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/tablelock"
)

// A holder paused past its lease, and the fence that stops its late write.
// The lease alone cannot: A checked that it held the key before it stalled,
// and nothing it could check would stay true until its write lands. The
// resource can: it remembers the largest token written, and A's is smaller
// than B's.
func Example() {
	dir, _ := os.MkdirTemp("", "fence-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := migrations.Up(ctx, db, sqllock.SQLite); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE invoices (id TEXT PRIMARY KEY, status TEXT NOT NULL);
		INSERT INTO invoices VALUES ('42', 'open')`); err != nil {
		log.Fatal(err)
	}
	locker, err := tablelock.New(db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	f, err := fence.New(sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	setStatus := func(status string) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE invoices SET status = ? WHERE id = '42'`, status)
			return err
		}
	}

	// A takes the key, checks it holds it, and stalls before writing: a GC
	// pause, a stopped VM. Its lease runs out meanwhile (ForceRelease
	// stands in for the expiry here).
	a, err := locker.Acquire(ctx, "invoice/42")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := locker.ForceRelease(ctx, "invoice/42", a.Token()); err != nil {
		log.Fatal(err)
	}

	// B gets the key with a larger token and writes through the fence:
	// Write takes the token from the lease Do put in ctx.
	err = sqllock.Do(ctx, locker, "invoice/42", func(ctx context.Context) error {
		token, _ := sqllock.TokenFrom(ctx)
		fmt.Println("B writes with token", token)
		return f.Write(ctx, db, "invoice/42", setStatus("paid by B"))
	})
	if err != nil {
		log.Fatal(err)
	}

	// A wakes up and writes with the token it was given. The fence, checked
	// in the same transaction, refuses it, and A rolls back.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = f.Check(ctx, tx, "invoice/42", a.Token())
	if err == nil {
		err = setStatus("refunded by A")(tx)
	}
	if err != nil {
		_ = tx.Rollback()
	} else if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("A writes with token %d: stale %v\n", a.Token(), errors.Is(err, sqllock.ErrStaleToken))
	_ = a.Release(ctx) // reports the loss

	var status string
	if err := db.QueryRowContext(ctx, `SELECT status FROM invoices WHERE id = '42'`).Scan(&status); err != nil {
		log.Fatal(err)
	}
	fmt.Println("invoice 42:", status)
	// Output:
	// B writes with token 2
	// A writes with token 1: stale true
	// invoice 42: paid by B
}
