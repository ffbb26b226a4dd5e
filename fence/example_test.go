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

// Claim on takeover. An import job's holder A is force-released by an
// operator while it works; it will learn of it only at its next renewal.
// B takes the key and claims the fence before it reads the progress, so
// A's next chunk is refused and B's reading is final: nothing is done
// twice and nothing lost.
func Example_claim() {
	dir, _ := os.MkdirTemp("", "fence-claim")
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
	if _, err := db.ExecContext(ctx, `CREATE TABLE chunks (job TEXT, chunk INTEGER, PRIMARY KEY (job, chunk))`); err != nil {
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
	writeChunk := func(ctx context.Context, n int) error {
		return f.Write(ctx, db, "import/42", func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO chunks VALUES ('import/42', ?)`, n)
			return err
		})
	}

	// A has written chunk 1 when the operator frees its key.
	a, err := locker.Acquire(ctx, "import/42")
	if err != nil {
		log.Fatal(err)
	}
	aCtx, aStop, aEnd := make(chan context.Context), make(chan struct{}), make(chan error)
	go func() {
		aEnd <- sqllock.DoLease(ctx, a, func(ctx context.Context) error {
			aCtx <- ctx // A's context: its lease rides on it
			<-aStop
			return nil
		})
	}()
	actx := <-aCtx
	if err := writeChunk(actx, 1); err != nil {
		log.Fatal(err)
	}
	if _, err := locker.ForceRelease(ctx, "import/42", a.Token()); err != nil {
		log.Fatal(err)
	}

	err = sqllock.Do(ctx, locker, "import/42", func(ctx context.Context) error {
		// Claim first, then read: older holders are refused from here on.
		if err := f.Claim(ctx, db, "import/42"); err != nil {
			return err
		}
		var done int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM chunks WHERE job = 'import/42'`).Scan(&done); err != nil {
			return err
		}
		fmt.Println("B resumes after chunk", done)
		// A, not told yet, tries its next chunk.
		err := writeChunk(actx, 2)
		fmt.Println("A's late chunk 2 refused:", errors.Is(err, sqllock.ErrStaleToken))
		return writeChunk(ctx, done+1)
	})
	if err != nil {
		log.Fatal(err)
	}
	close(aStop)
	fmt.Println("A learns of its loss:", errors.Is(<-aEnd, sqllock.ErrLockLost))
	var chunks int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM chunks`).Scan(&chunks); err != nil {
		log.Fatal(err)
	}
	fmt.Println("chunks written:", chunks)
	// Output:
	// B resumes after chunk 1
	// A's late chunk 2 refused: true
	// A learns of its loss: true
	// chunks written: 2
}
