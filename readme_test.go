package sqllock_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite README.md's example blocks from the Examples")

// readmeExample marks a code block of README.md that comes from the code
// the test suite runs, followed by a ```go block:
//
//	<!-- example: path/example_test.go ExampleName -->  the body of a function (an Example's)
//	<!-- code: path/file.go name -->                    a whole function, its doc comment included
var readmeExample = regexp.MustCompile("(?s)<!-- (example|code): (\\S+) (\\w+) -->\n```go\n(.*?)```\n")

// TestReadmeExamples keeps the README's code the code of Examples the test
// suite runs, so it cannot drift from what compiles and works. Run
// `go test -run TestReadmeExamples -update-readme .` after changing an
// Example.
func TestReadmeExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	matches := readmeExample.FindAllSubmatchIndex(readme, -1)
	if len(matches) == 0 {
		t.Fatal("README.md has no example blocks")
	}
	// Every Go block is one of them: none is code nothing runs.
	if n := bytes.Count(readme, []byte("```go\n")); n != len(matches) {
		t.Errorf("README.md has %d Go blocks, %d of them marked with the code they come from", n, len(matches))
	}
	// A user's guide, not a record: evidence, figures and operations
	// live in docs/.
	if n := bytes.Count(readme, []byte("\n")); n > 350 {
		t.Errorf("README.md has %d lines, more than 350: move the detail to docs/", n)
	}
	var out bytes.Buffer
	last := 0
	for _, m := range matches {
		kind, file, name, body := string(readme[m[2]:m[3]]), string(readme[m[4]:m[5]]), string(readme[m[6]:m[7]]), string(readme[m[8]:m[9]])
		want, err := exampleBody(file, name, kind == "code")
		if err != nil {
			t.Fatalf("README block %s %s: %v", file, name, err)
		}
		if body != want && !*updateReadme {
			t.Errorf("README block of %s in %s differs from the Example; run go test -run TestReadmeExamples -update-readme .\n--- README\n%s--- Example\n%s", name, file, body, want)
		}
		out.Write(readme[last:m[8]])
		out.WriteString(want)
		last = m[9]
	}
	out.Write(readme[last:])
	if *updateReadme && !bytes.Equal(out.Bytes(), readme) {
		if err := os.WriteFile("README.md", out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("README.md rewritten from the Examples")
	}
}

// exampleBody returns the statements of function name in file, printed as
// gofmt would, one indent level removed, without its Output comment; with
// whole, the function itself with its doc comment.
func exampleBody(file, name string, whole bool) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
	if err != nil {
		return "", err
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name {
			fn = fd
		}
	}
	if fn == nil {
		return "", fmt.Errorf("no function %s", name)
	}
	var buf bytes.Buffer
	cfg := printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}
	if whole {
		for _, l := range strings.Split(strings.TrimSuffix(fn.Doc.Text(), "\n"), "\n") {
			buf.WriteString(strings.TrimRight("// "+l, " ") + "\n")
		}
		doc := fn.Doc
		fn.Doc = nil // printed above
		err := cfg.Fprint(&buf, fset, &printer.CommentedNode{Node: fn, Comments: f.Comments})
		fn.Doc = doc
		return buf.String() + "\n", err
	}
	if err := cfg.Fprint(&buf, fset, &printer.CommentedNode{Node: fn.Body, Comments: f.Comments}); err != nil {
		return "", err
	}
	lines := strings.Split(buf.String(), "\n")
	lines = lines[1 : len(lines)-1] // the braces
	var b strings.Builder
	for _, l := range lines {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "// Output:") || strings.HasPrefix(trimmed, "// Unordered output:") {
			break
		}
		b.WriteString(strings.TrimPrefix(l, "\t") + "\n")
	}
	return b.String(), nil
}

// The README's recipes: short functions the README quotes whole, run by
// TestReadmeRecipes on every dialect.

// bind turns the ? placeholders of query into $1, $2, … on PostgreSQL, so
// one query serves every dialect (sqlx's Rebind does the same).
func bind(d sqllock.Dialect, query string) string {
	if d != sqllock.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// upload copies one file to the bucket, with at most 3 uploads at once
// across every replica.
func upload(ctx context.Context, sem *semaphore.Semaphore, copyFile func(ctx context.Context) error) error {
	p, err := sem.Acquire(ctx, "uploads", 3) // waits while 3 permits are held
	if err != nil {
		return err
	}
	// copyFile's ctx ends if the permit is lost; the permit is released after.
	return sqllock.DoLease(ctx, p, copyFile)
}

// readCatalog reads the catalog; readers in every process read at once,
// and wait while a writer holds the key or waits for it.
func readCatalog(ctx context.Context, rw *rwlock.RWLock, read func(ctx context.Context) error) error {
	r, err := rw.RLock(ctx, "catalog")
	if err != nil {
		return err
	}
	return sqllock.DoLease(ctx, r, read)
}

// writeCatalog rewrites the catalog alone: it waits for the readers before
// it, and readers after it wait for it. Call it outside any read of the
// catalog: a goroutine that holds a read and asks to write is refused.
func writeCatalog(ctx context.Context, rw *rwlock.RWLock, write func(ctx context.Context) error) error {
	w, err := rw.Lock(ctx, "catalog")
	if err != nil {
		return err
	}
	return sqllock.DoLease(ctx, w, write) // ctx carries w's token, larger than every earlier hold's
}

// lead campaigns to lead the scheduler and, while this replica leads,
// runs tick every period with the term, the leadership's fencing token.
// It returns when the leadership is lost (a successor may already lead:
// stop at once) or ctx ends, resigning then.
func lead(ctx context.Context, e *election.Election, me string, period time.Duration, tick func(ctx context.Context, term int64) error) error {
	ld, err := e.Campaign(ctx, "scheduler", me) // blocks until this replica leads
	if err != nil {
		return err
	}
	defer ld.Resign(context.WithoutCancel(ctx))
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ld.Done():
			return ld.Err() // lost: matches sqllock.ErrLockLost
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if err := tick(ctx, ld.Term()); err != nil {
				return err
			}
		}
	}
}

// watchLeaders writes every leader of the scheduler to w, in term order,
// each once, until ctx ends.
func watchLeaders(ctx context.Context, e *election.Election, w io.Writer) error {
	leaders, err := e.Observe(ctx, "scheduler")
	if err != nil {
		return err
	}
	for l := range leaders {
		fmt.Fprintf(w, "term %d: %s, since %s\n", l.Term, l.Value, l.Since.Format(time.RFC3339))
	}
	return ctx.Err()
}

// nightlyReport runs in every replica; at each firing of sched one of them
// builds the report and the others skip. A crashed runner frees the job
// after AtMost, a live one keeps it however long it runs (KeepAlive), and
// replicas whose clocks fire up to AtLeast apart do not run it twice.
func nightlyReport(ctx context.Context, guard *jobguard.Guard, sched jobguard.Schedule, build func(ctx context.Context) error) error {
	job := jobguard.Job{Name: "nightly-report", AtMost: time.Minute, KeepAlive: true, AtLeast: 30 * time.Second}
	return guard.Loop(ctx, job, sched, build)
}

// setPrice sets an item's price under the key "price/<sku>". Write checks
// the lease's token in the transaction of the update, so a holder paused
// past its lease cannot overwrite the price its successor wrote.
func setPrice(ctx context.Context, locker sqllock.Locker, f *fence.Fence, db *sql.DB, d sqllock.Dialect, sku string, cents int) error {
	key := "price/" + sku
	return sqllock.Do(ctx, locker, key, func(ctx context.Context) error {
		return f.Write(ctx, db, key, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, bind(d, "UPDATE prices SET cents = ? WHERE sku = ?"), cents, sku)
			return err
		})
	})
}

// TestReadmeRecipes runs the README's recipes, on a SQLite file of the
// test's own: their keys are fixed, as an application's are, and no other
// test may hold them meanwhile. Each primitive is tested on every dialect
// in its own package.
func TestReadmeRecipes(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "locks.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := sqllock.SQLite
	if err := migrations.Up(ctx, db, d); err != nil {
		t.Fatal(err)
	}
	ttl := tablelock.WithTTL(5 * time.Second)

	t.Run("semaphore", func(t *testing.T) {
		sem, err := semaphore.New(db, d, ttl)
		if err != nil {
			t.Fatal(err)
		}
		defer sem.Close()
		var now, most atomic.Int32
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := upload(ctx, sem, func(ctx context.Context) error {
					if _, ok := sqllock.TokenFrom(ctx); !ok {
						return errors.New("no token in the upload's context")
					}
					n := now.Add(1)
					defer now.Add(-1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(30 * time.Millisecond)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if m := most.Load(); m > 3 || m < 1 {
			t.Errorf("%d uploads at once, want 1 to 3", m)
		}
	})

	t.Run("rwlock", func(t *testing.T) {
		rw, err := rwlock.New(db, d, 8, ttl)
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close()
		var readers, writers atomic.Int32
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if i == 2 {
					err = writeCatalog(ctx, rw, func(ctx context.Context) error {
						writers.Add(1)
						defer writers.Add(-1)
						if n := readers.Load(); n != 0 {
							return fmt.Errorf("a writer beside %d readers", n)
						}
						time.Sleep(30 * time.Millisecond)
						return nil
					})
				} else {
					err = readCatalog(ctx, rw, func(ctx context.Context) error {
						readers.Add(1)
						defer readers.Add(-1)
						if writers.Load() != 0 {
							return errors.New("a reader beside the writer")
						}
						time.Sleep(30 * time.Millisecond)
						return nil
					})
				}
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	})

	t.Run("election", func(t *testing.T) {
		e, err := election.New(db, d, ttl)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		var seen syncBuffer
		wctx, stopWatch := context.WithCancel(ctx)
		watched := make(chan error, 1)
		go func() { watched <- watchLeaders(wctx, e, &seen) }()

		terms := make(chan int64, 100)
		tick := func(ctx context.Context, term int64) error {
			select {
			case terms <- term:
			default:
			}
			return nil
		}
		actx, stopA := context.WithCancel(ctx)
		a := make(chan error, 1)
		go func() { a <- lead(actx, e, "replica-a", 10*time.Millisecond, tick) }()
		first := <-terms
		// replica-b, on an Election of its own, waits for a's term to end.
		eb, err := election.New(db, d, ttl)
		if err != nil {
			t.Fatal(err)
		}
		b := make(chan error, 1)
		go func() { b <- lead(ctx, eb, "replica-b", 10*time.Millisecond, tick) }()
		stopA()
		if err := <-a; !errors.Is(err, context.Canceled) {
			t.Errorf("replica-a after its context ended: %v", err)
		}
		for term := range terms {
			if term > first {
				break
			}
		}
		// Closing replica-b's Election ends its leadership as lost: the
		// select on Done returns.
		eb.Close()
		if err := <-b; !errors.Is(err, sqllock.ErrLockLost) && !errors.Is(err, sqllock.ErrClosed) {
			t.Errorf("replica-b after losing its leadership: %v, want ErrLockLost", err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(seen.String(), "replica-b") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		stopWatch()
		if err := <-watched; !errors.Is(err, context.Canceled) {
			t.Errorf("watchLeaders: %v", err)
		}
		out := seen.String()
		if i, j := strings.Index(out, ": replica-a,"), strings.Index(out, ": replica-b,"); i < 0 || j < i {
			t.Errorf("watchLeaders wrote %q, want replica-a, then replica-b", out)
		}
	})

	t.Run("jobguard", func(t *testing.T) {
		// Firings every 100 ms: Every would refuse a period below the
		// recipe's AtLeast.
		sched := everyTick(100 * time.Millisecond)
		var runs atomic.Int32
		lctx, stop := context.WithTimeout(ctx, time.Second)
		defer stop()
		var wg sync.WaitGroup
		for range 3 {
			guard, err := jobguard.New(db, d)
			if err != nil {
				t.Fatal(err)
			}
			defer guard.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := nightlyReport(lctx, guard, sched, func(ctx context.Context) error {
					runs.Add(1)
					return nil
				})
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("the loop ended with %v", err)
				}
			}()
		}
		wg.Wait()
		// Every firing of the second went to one replica, and AtLeast
		// (30 s) keeps the job taken past all but the first.
		if n := runs.Load(); n != 1 {
			t.Errorf("%d runs over three replicas and ten firings, want 1", n)
		}
	})

	t.Run("fence", func(t *testing.T) {
		if _, err := db.ExecContext(ctx, "CREATE TABLE prices (sku TEXT PRIMARY KEY, cents INTEGER NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO prices VALUES ('tea', 300)"); err != nil {
			t.Fatal(err)
		}
		locker, err := tablelock.New(db, d, ttl)
		if err != nil {
			t.Fatal(err)
		}
		defer locker.Close()
		f, err := fence.New(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, cents := range []int{350, 400} {
			if err := setPrice(ctx, locker, f, db, d, "tea", cents); err != nil {
				t.Fatal(err)
			}
		}
		var cents int
		if err := db.QueryRowContext(ctx, "SELECT cents FROM prices WHERE sku = 'tea'").Scan(&cents); err != nil || cents != 400 {
			t.Fatalf("price %d (%v), want 400", cents, err)
		}
		// A holder with an older token is refused.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := f.Check(ctx, tx, "price/tea", 1); !errors.Is(err, sqllock.ErrStaleToken) {
			t.Errorf("a write under an older token: %v, want ErrStaleToken", err)
		}
	})
}

// everyTick fires at every multiple of its period.
type everyTick time.Duration

func (p everyTick) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(p)).Add(time.Duration(p))
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
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
