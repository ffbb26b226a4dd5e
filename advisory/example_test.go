package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
)

// The lock names and ids a key maps to, for finding it in pg_locks or
// IS_USED_LOCK.
func ExamplePostgresKey() {
	fmt.Println(advisory.PostgresKey("sqllock", "jobs/nightly"))
	fmt.Println(advisory.MySQLName("sqllock", "jobs/nightly"))
	// Output:
	// 3019283710020832378
	// sqllock:jobs/nightly
}

// Guard a nightly job: one process runs it, the others skip it.
func Example() {
	db, err := sql.Open("pgx", "postgres://localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	l, err := advisory.New(db, sqllock.Postgres)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	lease, err := l.TryAcquire(ctx, "jobs/nightly")
	if errors.Is(err, sqllock.ErrNotAcquired) {
		return // another process runs it
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	// Writes carry lease.Token(), so a stale holder is refused.
	fmt.Println("running with token", lease.Token())
}

// A lock that lives as long as a transaction, through PgBouncer in
// transaction mode too.
func ExampleLocker_AcquireTx() {
	var db *sql.DB // opened with the pgx driver
	l, err := advisory.New(db, sqllock.Postgres)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	token, err := l.AcquireTx(ctx, tx, "stock/sku-42")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE stock SET n = n - 1, fence = $1 WHERE sku = 'sku-42' AND fence < $1", token); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil { // releases the lock
		log.Fatal(err)
	}
}
