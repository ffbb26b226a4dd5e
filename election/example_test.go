package election_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/migrations"
)

// Two replicas campaign; the first leads, the second waits until it
// resigns and then leads with a larger term. An observer sees both.
func Example() {
	dir, _ := os.MkdirTemp("", "election-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := migrations.Up(ctx, db, sqllock.SQLite); err != nil {
		log.Fatal(err)
	}
	e, err := election.New(db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	first, err := e.Campaign(ctx, "scheduler", "replica-a")
	if err != nil {
		log.Fatal(err)
	}
	seen, err := e.Observe(ctx, "scheduler")
	if err != nil {
		log.Fatal(err)
	}
	ld, _ := e.Leader(ctx, "scheduler")
	fmt.Println("leader:", ld.Value)

	second := make(chan *election.Leadership)
	go func() {
		lead, err := e.Campaign(ctx, "scheduler", "replica-b") // waits
		if err != nil {
			log.Fatal(err)
		}
		second <- lead
	}()
	time.Sleep(50 * time.Millisecond)
	if err := first.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	next := <-second
	fmt.Println("next term is larger:", next.Term() > first.Term())
	for range 2 {
		fmt.Println("observed:", (<-seen).Value)
	}
	_ = next.Resign(ctx)
	_, err = e.Leader(ctx, "scheduler")
	fmt.Println("after resigning:", errors.Is(err, election.ErrNoLeader))
	// Output:
	// leader: replica-a
	// next term is larger: true
	// observed: replica-a
	// observed: replica-b
	// after resigning: true
}
