package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
)

func TestMain(m *testing.M) { testdb.VerifyNoLeaks(m) }

// syncBuffer collects the replicas' log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var line = regexp.MustCompile(`(?m)^(\S+): (built the report|skipped, another replica has it|the report failed.*)$`)

// The nightly-job recipe: three replicas, each with its own handle (as
// three processes would have), fire on one schedule; each firing builds
// the report once, and the fenced counter counts every run. On every
// dialect, through database/sql, and on the servers through a pgx pool
// (stdlib.OpenDBFromPool) and sqlx.
func TestThreeReplicas(t *testing.T) {
	var logs syncBuffer
	log.SetOutput(&logs)
	log.SetFlags(0)
	defer log.SetOutput(os.Stderr)
	type handle struct {
		name string
		open func(t *testing.T, db *testdb.DB) *sql.DB
	}
	plain := handle{"database/sql", func(t *testing.T, db *testdb.DB) *sql.DB { return testdb.Fresh(t, db.Dialect, 0).DB }}
	pgx := handle{"pgxpool", func(t *testing.T, db *testdb.DB) *sql.DB {
		pool, err := pgxpool.New(context.Background(), db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		sdb := stdlib.OpenDBFromPool(pool)
		t.Cleanup(func() { sdb.Close(); pool.Close() })
		return sdb
	}}
	sqlxH := handle{"sqlx", func(t *testing.T, db *testdb.DB) *sql.DB {
		dbx := sqlx.NewDb(testdb.Fresh(t, db.Dialect, 0).DB, db.Driver)
		return dbx.DB // sqlx wraps a *sql.DB: hand that to sqllock
	}}
	for _, d := range testdb.Dialects {
		handles := []handle{plain}
		switch d {
		case sqllock.Postgres:
			handles = append(handles, pgx, sqlxH)
		case sqllock.MariaDB, sqllock.MySQL:
			handles = append(handles, sqlxH)
		}
		for _, h := range handles {
			t.Run(d.String()+"/"+h.name, func(t *testing.T) {
				db := testdb.Open(t, d)
				// AtLeast absorbs how far apart the replicas try for one
				// firing: most of the period, for a loaded test machine.
				const period = 800 * time.Millisecond
				job := jobguard.Job{Name: "nightly-report", AtMost: time.Minute, KeepAlive: true, AtLeast: 3 * period / 4}
				sched, err := jobguard.Every(period)
				if err != nil {
					t.Fatal(err)
				}
				before := runs(t, db.DB)
				start := len(logs.String())
				end := time.Now().Add(4*period + period/2)
				ctx, cancel := context.WithDeadline(context.Background(), end)
				defer cancel()
				var wg sync.WaitGroup
				for range 3 {
					r := h.open(t, db)
					wg.Go(func() {
						if err := replica(ctx, r, d, job, sched); !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("replica: %v", err)
						}
					})
				}
				wg.Wait()
				// The firing the test's own end may cut short is not judged.
				cutoff := end.Add(-period / 2).Format("15:04:05.000")
				built, tried := map[string]int{}, map[string]int{}
				for _, m := range line.FindAllStringSubmatch(logs.String()[start:], -1) {
					if m[1] > cutoff {
						continue
					}
					tried[m[1]]++
					switch m[2] {
					case "built the report":
						built[m[1]]++
					case "skipped, another replica has it":
					default:
						t.Errorf("%s: %s", m[1], m[2])
					}
				}
				t.Logf("built %v; tried %v", built, tried)
				if len(tried) < 3 {
					t.Errorf("%d firings judged in 4.5 periods", len(tried))
				}
				for at := range tried {
					if built[at] != 1 {
						t.Errorf("firing %s built the report %d times, want once", at, built[at])
					}
				}
				if got := runs(t, db.DB) - before; got < len(built) || got > len(built)+1 {
					t.Errorf("the fenced counter grew by %d for %d runs judged (and perhaps one cut short)", got, len(built))
				}
			})
		}
	}
}

func runs(t *testing.T, db *sql.DB) int {
	t.Helper()
	if err := createReportTable(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT runs FROM nightly_report WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
