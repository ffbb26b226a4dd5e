package recipes_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// importWorker works through an import of chunks, one at a time, under
// the key "import/<job>", until every chunk is done or ctx ends. Run it in
// every replica: one works, the others wait for the key. Hold keeps the
// key: after a loss (an operator's force release, a long pause) it takes
// the key again and runs the function anew. Each new holder first claims
// the fence, then reads the progress: from the claim on, the writes of an
// older holder still running are refused, so the progress it reads is
// final and no chunk is done twice.
func importWorker(ctx context.Context, locker sqllock.Locker, db *sql.DB, d sqllock.Dialect, f *fence.Fence,
	job string, chunks int, importChunk func(ctx context.Context, chunk int) error) error {
	key := "import/" + job
	return sqllock.Hold(ctx, locker, key, func(ctx context.Context) error {
		if err := f.Claim(ctx, db, key); err != nil {
			return err
		}
		var done int
		if err := db.QueryRowContext(ctx, bind(d, "SELECT COALESCE(MAX(chunk), 0) FROM import_chunks WHERE job = ?"), job).Scan(&done); err != nil {
			return err
		}
		for c := done + 1; c <= chunks; c++ {
			if err := importChunk(ctx, c); err != nil {
				return err
			}
			// The chunk counts as done only through the fence.
			err := f.Write(ctx, db, key, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, bind(d, "INSERT INTO import_chunks (job, chunk) VALUES (?, ?)"), job, c)
				return err
			})
			if err != nil {
				return err // lost or refused: Hold takes the key again
			}
		}
		return nil
	}, sqllock.HoldOnRetry(func(err error) { log.Printf("import %s: %v; taking the key again", job, err) }))
}

// TestImportWorker: two replicas of the worker import one job while an
// operator force-releases the key three times. The holder cut off keeps
// writing until its next renewal notices, as in the trial; the claim of
// the next holder makes those writes refused, and every chunk is done
// exactly once (the chunk is the primary key: a second copy would fail
// the worker).
func TestImportWorker(t *testing.T) {
	log.SetOutput(testWriter{t})
	defer log.SetOutput(logOut)
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		d := db.Dialect
		exec(t, db, "DROP TABLE IF EXISTS import_chunks", "CREATE TABLE import_chunks (job varchar(64) NOT NULL, chunk integer NOT NULL, PRIMARY KEY (job, chunk))")
		t.Cleanup(func() { db.Exec("DROP TABLE import_chunks") })
		f, err := fence.New(d)
		if err != nil {
			t.Fatal(err)
		}
		job := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
		const chunks = 40
		var imported atomic.Int32
		importChunk := func(ctx context.Context, c int) error {
			imported.Add(1)
			select { // the work outside the database
			case <-time.After(10 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		ttl := 600 * time.Millisecond
		lockers := make([]*tablelock.Locker, 2)
		for i := range lockers {
			l, err := tablelock.New(db.DB, d, tablelock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			lockers[i] = l
		}
		workersDone := make(chan struct{})
		var wg sync.WaitGroup
		for _, l := range lockers {
			wg.Go(func() {
				if err := importWorker(ctx, l, db.DB, d, f, job, chunks, importChunk); err != nil {
					t.Errorf("worker: %v", err)
				}
			})
		}
		go func() { wg.Wait(); close(workersDone) }()
		forced := 0
		for forced < 3 {
			select {
			case <-workersDone:
				t.Fatalf("the import finished after %d of 3 force releases", forced)
			case <-time.After(100 * time.Millisecond):
			}
			infos, err := lockers[0].List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range infos {
				if in.Key == "import/"+job {
					if ok, err := lockers[0].ForceRelease(ctx, in.Key, in.Token); err == nil && ok {
						forced++
					}
				}
			}
		}
		<-workersDone
		var n, distinct, max int
		if err := db.QueryRowContext(ctx, bind(d, "SELECT COUNT(*), COUNT(DISTINCT chunk), COALESCE(MAX(chunk), 0) FROM import_chunks WHERE job = ?"), job).Scan(&n, &distinct, &max); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d chunks recorded, %d imported (the rest were cut off by a loss and done again)", n, imported.Load())
		if n != chunks || distinct != chunks || max != chunks {
			t.Errorf("%d chunk rows (%d distinct, up to %d), want each of 1..%d once", n, distinct, max, chunks)
		}
	})
}

var logOut = log.Writer()

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
