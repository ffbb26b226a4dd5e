package filefence_test

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
	"github.com/sqllock/sqllock/fence/filefence"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/tablelock"
)

// A holder paused past its lease, and the file that refuses its late
// append. A has its token and stalls before writing; the key goes to B,
// whose append records a larger token beside the file; A's append, when
// it comes, is refused, so no line of A's lands after B's.
func Example() {
	dir, _ := os.MkdirTemp("", "filefence-example")
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
	locker, err := tablelock.New(db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	out, err := filefence.New(filepath.Join(dir, "out.log"))
	if err != nil {
		log.Fatal(err)
	}

	// A takes the key and stalls before its write: a GC pause, a stopped
	// VM. Its lease runs out (ForceRelease stands in for the expiry).
	a, err := locker.Acquire(ctx, "out.log")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := locker.ForceRelease(ctx, "out.log", a.Token()); err != nil {
		log.Fatal(err)
	}

	// B takes the key with a larger token and appends with it.
	err = sqllock.Do(ctx, locker, "out.log", func(ctx context.Context) error {
		token, _ := sqllock.TokenFrom(ctx)
		return out.Append(ctx, token, []byte(fmt.Sprintf("B token=%d\n", token)))
	})
	if err != nil {
		log.Fatal(err)
	}

	// A wakes up and appends with the token it was given: refused.
	err = out.Append(ctx, a.Token(), []byte(fmt.Sprintf("A token=%d\n", a.Token())))
	fmt.Println("A's late append stale:", errors.Is(err, sqllock.ErrStaleToken))
	_ = a.Release(ctx) // reports the loss

	b, _ := os.ReadFile(out.Path())
	fmt.Print(string(b))
	// Output:
	// A's late append stale: true
	// B token=2
}
