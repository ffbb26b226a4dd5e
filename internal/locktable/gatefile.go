package locktable

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// fileGates are a Gate's gates where the database is a file on this
// machine (SQLite): a named pipe per key in the folder GateDir names,
// which the holder keeps open (see keepFIFO). As with MariaDB's gates the
// row stays the only source of truth and every wait is bounded; a pipe
// the holder could not make (a read-only folder, an in-memory database,
// Windows) only leaves its waiters polling.
type fileGates struct {
	db     *sql.DB
	table  string // as configured: names the pipes
	schema string // the table's schema: whose file the folder is beside

	mu        sync.Mutex
	dir       string // "" until found
	none      bool   // the database has no file: no gates
	resolving bool
	finding   sync.WaitGroup       // the background look for the folder
	want      map[string]int       // Arms not yet disarmed, by key
	kept      map[string]*keptFIFO // by key
	closed    bool
	stop      chan struct{} // closed by close: the background look gives up
}

// keptFIFO is a pipe this Gate keeps open.
type keptFIFO struct {
	path string
	fd   int
}

// fileGater is a store whose gates are files beside its database file.
type fileGater interface {
	// schema is the schema of the table (main unless qualified).
	schema(table string) string
}

func newFileGates(db *sql.DB, table, schema string) *fileGates {
	return &fileGates{db: db, table: table, schema: schema, want: map[string]int{}, kept: map[string]*keptFIFO{}, stop: make(chan struct{})}
}

// GateDir is the folder of the gates of the SQLite database file dbFile:
// beside it, named after it.
func GateDir(dbFile string) string { return dbFile + "-sqllock-gates" }

// folder returns the gate folder, finding it first (one statement, once)
// when wait; otherwise a folder not found yet is looked for in the
// background and "" returned: Arm runs under a hold's lock and must not
// wait for the pool.
func (f *fileGates) folder(ctx context.Context, wait bool) string {
	f.mu.Lock()
	if f.dir != "" || f.none {
		defer f.mu.Unlock()
		return f.dir
	}
	if !wait {
		if !f.resolving && !f.closed {
			f.resolving = true
			f.finding.Add(1)
			go f.findArmed()
		}
		f.mu.Unlock()
		return ""
	}
	f.mu.Unlock()
	return f.find(ctx)
}

// findArmed looks for the folder in the background. A look that failed
// (a pool too busy to answer within gateBound) looks again, backing off
// up to gateBound, for as long as some hold wants its gate: otherwise
// that hold's waiters would poll until the next Arm.
func (f *fileGates) findArmed() {
	defer f.finding.Done()
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, gateBound) {
		ctx, cancel := context.WithTimeout(context.Background(), gateBound)
		f.find(ctx)
		cancel()
		f.mu.Lock()
		if f.dir != "" || f.none || f.closed || len(f.want) == 0 {
			f.resolving = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-f.stop:
			t.Stop()
			f.mu.Lock()
			f.resolving = false
			f.mu.Unlock()
			return
		}
	}
}

// find asks the database for its file, and keeps the folder beside it.
func (f *fileGates) find(ctx context.Context) string {
	var file string
	err := f.db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = ?`, f.schema).Scan(&file)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == sql.ErrNoRows || (err == nil && file == ""):
		f.none = true // in memory, or temporary
	case err == nil:
		f.dir = GateDir(file)
		for key := range f.want {
			f.keep(f.dir, key) // armed before the folder was known
		}
	}
	return f.dir
}

// path is key's pipe in dir.
func (f *fileGates) path(dir, key string) string {
	return filepath.Join(dir, strings.TrimPrefix(GateName(f.table, key), "sqllock.gate."))
}

// arm keeps key's pipe open, making the folder and the pipe when needed;
// a Gate that has not found its folder yet keeps it once found. It does
// nothing where they cannot be made: the waiters poll.
func (f *fileGates) arm(key string) {
	f.folder(context.Background(), false)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	// The folder as it is now, not as folder returned it: a look that
	// ended in between kept only the keys wanted before it.
	f.want[key]++
	if f.dir != "" {
		f.keep(f.dir, key)
	}
}

// keep opens key's pipe unless kept already. f.mu held.
func (f *fileGates) keep(dir, key string) {
	if f.kept[key] != nil {
		return
	}
	p := f.path(dir, key)
	fd, err := keepFIFO(p)
	if err != nil {
		if os.MkdirAll(dir, 0o755) != nil {
			return
		}
		if fd, err = keepFIFO(p); err != nil {
			return
		}
	}
	f.kept[key] = &keptFIFO{path: p, fd: fd}
}

// disarm ends an arm; the last lets go of the pipe.
func (f *fileGates) disarm(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.want[key] == 0 {
		return // closed since
	}
	if f.want[key]--; f.want[key] > 0 {
		return
	}
	delete(f.want, key)
	if k := f.kept[key]; k != nil {
		delete(f.kept, key)
		dropFIFO(k.path, k.fd)
	}
}

// wait blocks up to d until key's pipe has no writer (see waitFIFO).
func (f *fileGates) wait(ctx context.Context, key string, d time.Duration) (bool, error) {
	dir := f.folder(ctx, true)
	if dir == "" {
		return false, errNoGate
	}
	return waitFIFO(ctx, f.path(dir, key), d)
}

// close lets go of every pipe kept.
func (f *fileGates) close() {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.stop)
	}
	f.want = map[string]int{}
	f.mu.Unlock()
	f.finding.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, k := range f.kept {
		dropFIFO(k.path, k.fd)
		delete(f.kept, key)
	}
}
