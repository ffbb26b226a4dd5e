package main

// These tests drive the built binary as a user would: as a process, against
// the test databases, checking its output and exit codes. PostgreSQL and
// MariaDB get a private database per test (created from the testdb DSNs and
// dropped afterwards), so migrate down and "unmigrated" never touch the
// shared one.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sqllock-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "sqllock")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sqllock:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// sqllockCmd runs the binary with args and SQLLOCK_DSN unset.
func sqllockCmd(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SQLLOCK_DSN=")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running sqllock %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// want checks the exit code and, for failures, that stderr is one line
// containing each of msgs.
func (r result) want(t *testing.T, code int, msgs ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	if code != 0 {
		if lines := strings.Count(strings.TrimRight(r.stderr, "\n"), "\n"); lines != 0 || r.stderr == "" {
			t.Errorf("stderr is not one line:\n%s", r.stderr)
		}
	}
	for _, m := range msgs {
		if !strings.Contains(r.stderr, m) && !strings.Contains(r.stdout, m) {
			t.Errorf("output does not mention %q\nstdout:\n%s\nstderr:\n%s", m, r.stdout, r.stderr)
		}
	}
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, r.stdout)
	}
	return v
}

// dbTarget is a private, empty database for one test.
type dbTarget struct {
	dialect sqllock.Dialect
	dsn     string  // for --dsn
	db      *sql.DB // to check the server's state
	path    string  // SQLite file
}

// tables counts the tables of the database: "nothing written" checks.
func (d dbTarget) tables(t *testing.T) int {
	t.Helper()
	if d.dialect == sqllock.SQLite {
		if _, err := os.Stat(d.path); os.IsNotExist(err) {
			return 0
		}
	}
	q := map[sqllock.Dialect]string{
		sqllock.Postgres: `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`,
		sqllock.MariaDB:  `SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()`,
		sqllock.SQLite:   `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`,
	}[d.dialect]
	var n int
	if err := d.db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// privateDB is a scratch database (testdb.Scratch) with the --dsn form the
// command takes for it.
func privateDB(t *testing.T, d sqllock.Dialect) dbTarget {
	t.Helper()
	s := testdb.Scratch(t, d)
	switch d {
	case sqllock.SQLite:
		path := testdb.SQLitePath(s.DSN)
		return dbTarget{dialect: d, dsn: "sqlite://" + path, db: s.DB, path: path}
	case sqllock.MariaDB:
		cfg, err := mysql.ParseDSN(s.DSN)
		if err != nil || cfg.Net != "tcp" {
			t.Skipf("the MySQL DSN is not a TCP one; these tests need one")
		}
		user := url.User(cfg.User)
		if cfg.Passwd != "" {
			user = url.UserPassword(cfg.User, cfg.Passwd)
		}
		// The mysql:// form, which the command translates.
		dsn := (&url.URL{Scheme: "mysql", User: user, Host: cfg.Addr, Path: "/" + cfg.DBName}).String()
		return dbTarget{dialect: d, dsn: dsn, db: s.DB}
	}
	return dbTarget{dialect: d, dsn: s.DSN, db: s.DB} // PostgreSQL: a URL
}

// forEachDB runs fn per dialect on a private database.
func forEachDB(t *testing.T, fn func(t *testing.T, d dbTarget)) {
	for _, d := range testdb.Dialects {
		t.Run(d.String(), func(t *testing.T) { fn(t, privateDB(t, d)) })
	}
}

// migrated returns a private database for d with the migrations applied
// through the command.
func migrated(t *testing.T, d sqllock.Dialect) dbTarget {
	t.Helper()
	tg := privateDB(t, d)
	sqllockCmd(t, "migrate", "up", "--dsn", tg.dsn).want(t, 0, "applied")
	return tg
}

func TestUsageAndDSNErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"demo", "dance"}, exitUsage, `unknown demo "dance"`},
		{[]string{"migrate", "sideways", "--data-dir", dir}, exitUsage, `unknown action "sideways"`},
		{[]string{"locks", "--no-such-flag"}, exitUsage, "flag provided but not defined"},
		{[]string{"locks", "--dsn", "redis://localhost"}, exitBadDSN, `unknown scheme "redis"`},
		{[]string{"locks", "--dsn", "nonsense"}, exitBadDSN, "bad --dsn"},
		{[]string{"locks", "--dsn", "mysql://root@127.0.0.1:3306"}, exitBadDSN, "needs a database name"},
		{[]string{"locks", "--dsn", "postgres://u:secret@127.0.0.1:1/db?connect_timeout=5"}, exitBadDSN, "cannot reach postgres"},
		{[]string{"demo", "stock", "--data-dir", dir, "--strategy", "rowlock"}, exitUnsupported, "unsupported on sqlite"},
		{[]string{"demo", "stock", "--data-dir", dir, "--strategy", "quantum"}, exitUsage, `unknown strategy "quantum"`},
		{[]string{"bench", "--data-dir", dir, "--strategy", "advisory"}, exitUnsupported, "strategy advisory"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := sqllockCmd(t, tc.args...)
			r.want(t, tc.code, tc.msg)
			if strings.Contains(r.stderr, "secret") {
				t.Errorf("the error shows the password: %s", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout on error: %q", r.stdout)
			}
		})
	}
	if r := sqllockCmd(t); r.code != exitUsage || !strings.Contains(r.stderr, "usage:") {
		t.Errorf("no arguments: exit %d, stderr %q; want usage and exit %d", r.code, r.stderr, exitUsage)
	}
}

func TestUnmigratedDatabase(t *testing.T) {
	forEachDB(t, func(t *testing.T, d dbTarget) {
		for _, args := range [][]string{{"locks"}, {"demo", "stock"}, {"demo", "job"}, {"bench"}} {
			r := sqllockCmd(t, append(args, "--dsn", d.dsn)...)
			r.want(t, exitNotMigrated, "sqllock migrate up")
		}
		if n := d.tables(t); n != 0 {
			t.Fatalf("%d tables in the database after refused commands, want nothing written", n)
		}
		// status reads the embedded files only, and writes nothing either.
		r := sqllockCmd(t, "migrate", "status", "--dsn", d.dsn)
		r.want(t, 0, "00001_sqllock.sql", "pending")
		if n := d.tables(t); n != 0 {
			t.Fatalf("%d tables after migrate status, want nothing written", n)
		}
	})
}

func TestMigrate(t *testing.T) {
	forEachDB(t, func(t *testing.T, d dbTarget) {
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0, "applied 00001_sqllock.sql")
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0, "is up to date")
		r := sqllockCmd(t, "migrate", "status", "--dsn", d.dsn)
		r.want(t, 0, "up to date")
		if strings.Contains(r.stdout, "pending") {
			t.Errorf("status after up lists pending migrations:\n%s", r.stdout)
		}
		sqllockCmd(t, "locks", "--dsn", d.dsn).want(t, 0, "no locks held")

		// One step down leaves the database behind the binary: refused.
		sqllockCmd(t, "migrate", "down", "--force", "--dsn", d.dsn).want(t, 0, "rolled back")
		sqllockCmd(t, "locks", "--dsn", d.dsn).want(t, exitNotMigrated, "pending migrations")
		sqllockCmd(t, "migrate", "down", "--all", "--force", "--dsn", d.dsn).want(t, 0, "rolled back 00001_sqllock.sql")
		// Only goose's version table is left.
		if n := d.tables(t); n != 1 {
			t.Errorf("%d tables after down --all, want only the version table", n)
		}
	})
}

type stockJSON struct {
	Units   int `json:"units"`
	Results []struct {
		Strategy string `json:"strategy"`
		Sold     int    `json:"sold"`
		Left     int    `json:"left"`
		Oversold int    `json:"oversold"`
		Retries  *int   `json:"retries"`
	} `json:"results"`
	Skipped []struct{ Strategy, Reason string } `json:"skipped"`
}

// The strategies demo stock runs by default, in order, per database.
var (
	onServers = []string{"tablelock", "rowlock", "optimistic", "advisory"}
	onSQLite  = []string{"tablelock", "optimistic"}
	notSQLite = []string{"rowlock", "advisory"}
)

// checkStock checks a demo stock --json report: exactly the strategies of
// want ran, each sold every unit and none it did not have, and the others
// were skipped with a reason that names the dialect and the alternative.
func checkStock(t *testing.T, r result, units int, want []string) stockJSON {
	t.Helper()
	r.want(t, 0)
	rep := decode[stockJSON](t, r)
	var ran []string
	for _, res := range rep.Results {
		ran = append(ran, res.Strategy)
		if res.Oversold != 0 || res.Sold != units || res.Left != 0 {
			t.Errorf("%s: sold %d, left %d, oversold %d; want all %d sold, none oversold", res.Strategy, res.Sold, res.Left, res.Oversold, units)
		}
		if res.Retries == nil || *res.Retries < 0 {
			t.Errorf("%s: retries %v, want a count", res.Strategy, res.Retries)
		}
	}
	if !slices.Equal(ran, want) {
		t.Errorf("strategies run: %v, want %v\n%s", ran, want, r.stdout)
	}
	for _, s := range rep.Skipped {
		if !strings.Contains(s.Reason, "unsupported on sqlite") || !strings.Contains(s.Reason, "use tablelock") {
			t.Errorf("%s skipped for %q, want the dialect and the alternative named", s.Strategy, s.Reason)
		}
	}
	if len(rep.Results)+len(rep.Skipped) != len(onServers) {
		t.Errorf("%d strategies run and %d skipped, want the four accounted for", len(rep.Results), len(rep.Skipped))
	}
	return rep
}

// TestDemoStockEmbedded is the README's first command: no server, no flags
// but a data folder, oversold 0.
func TestDemoStockEmbedded(t *testing.T) {
	dir := t.TempDir()
	r := sqllockCmd(t, "demo", "stock", "--data-dir", dir)
	r.want(t, 0, "tablelock", "optimistic", "oversold",
		"rowlock: skipped, unsupported on sqlite", "advisory: skipped, unsupported on sqlite")
	lines := 0
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && slices.Contains(onSQLite, f[0]) {
			lines++
			if f[1] != "500" || f[2] != "0" || f[3] != "0" {
				t.Errorf("%s line %q: want 500 sold, 0 left, 0 oversold", f[0], line)
			}
		}
	}
	if lines != len(onSQLite) {
		t.Errorf("%d result lines, want one for each of %v in:\n%s", lines, onSQLite, r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "sqllock.db")); err != nil {
		t.Errorf("the embedded database was not created in --data-dir: %v", err)
	}

	rep := checkStock(t, sqllockCmd(t, "demo", "stock", "--data-dir", dir, "--units", "120", "--procs", "3", "--workers", "6", "--json"), 120, onSQLite)
	var skipped []string
	for _, s := range rep.Skipped {
		skipped = append(skipped, s.Strategy)
	}
	if !slices.Equal(skipped, notSQLite) {
		t.Errorf("skipped %v, want %v", skipped, notSQLite)
	}
}

// TestDemoStockNone: without a lock the shop sells what it does not have,
// and the demo's count says so. This is what makes oversold 0 above mean
// something.
func TestDemoStockNone(t *testing.T) {
	r := sqllockCmd(t, "demo", "stock", "--data-dir", t.TempDir(), "--strategy", "none", "--units", "40", "--workers", "4", "--work", "2ms", "--json")
	r.want(t, 0)
	rep := decode[stockJSON](t, r)
	if len(rep.Results) != 1 || rep.Results[0].Strategy != "none" {
		t.Fatalf("results %+v, want none alone", rep.Results)
	}
	if res := rep.Results[0]; res.Oversold <= 0 || res.Sold != 40+res.Oversold {
		t.Errorf("no lock: sold %d, oversold %d; want more sold than the 40 units, by the oversold count", res.Sold, res.Oversold)
	}
}

func TestDemoStock(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB} {
		t.Run(d.String(), func(t *testing.T) {
			tg := migrated(t, d)
			checkStock(t, sqllockCmd(t, "demo", "stock", "--dsn", tg.dsn, "--units", "60", "--json"), 60, onServers)
			checkStock(t, sqllockCmd(t, "demo", "stock", "--dsn", tg.dsn, "--units", "60", "--procs", "2", "--workers", "4", "--json"), 60, onServers)
			// The demo's item rows and rowlock's lock rows go with the run.
			for _, table := range []string{"sqllock_demo_stock", "sqllock_rows"} {
				var n int
				if err := tg.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Errorf("%d rows left in %s after the demo", n, table)
				}
			}
		})
	}
}

type jobJSON struct {
	Periods []struct {
		Period  int     `json:"period"`
		Runs    int     `json:"runs"`
		Tokens  []int64 `json:"tokens"`
		Skipped int     `json:"skipped"`
	} `json:"periods"`
	OK bool `json:"exactly_once_per_period"`
}

func checkJob(t *testing.T, r result, replicas, periods int) {
	t.Helper()
	r.want(t, 0)
	rep := decode[jobJSON](t, r)
	if !rep.OK || len(rep.Periods) != periods {
		t.Fatalf("job report says ok=%v over %d periods, want ok over %d:\n%s", rep.OK, len(rep.Periods), periods, r.stdout)
	}
	var last int64
	for _, p := range rep.Periods {
		if p.Runs != 1 || p.Skipped != replicas-1 || len(p.Tokens) != 1 {
			t.Errorf("period %d: %d runs, %d skipped; want 1 and %d", p.Period, p.Runs, p.Skipped, replicas-1)
			continue
		}
		if p.Tokens[0] <= last {
			t.Errorf("period %d: token %d after %d, want increasing", p.Period, p.Tokens[0], last)
		}
		last = p.Tokens[0]
	}
}

func TestDemoJob(t *testing.T) {
	forEachDB(t, func(t *testing.T, d dbTarget) {
		if _, err := migrations.FS.ReadFile(d.dialect.String() + "/00004_jobguard.sql"); err != nil {
			t.Skipf("migration 00004_jobguard is not shipped for %v yet", d.dialect)
		}
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0)
		checkJob(t, sqllockCmd(t, "demo", "job", "--dsn", d.dsn, "--replicas", "3", "--periods", "3", "--period", "400ms", "--json"), 3, 3)
		checkJob(t, sqllockCmd(t, "demo", "job", "--dsn", d.dsn, "--replicas", "3", "--procs", "3", "--periods", "3", "--period", "400ms", "--json"), 3, 3)
	})
	// The table for people.
	r := sqllockCmd(t, "demo", "job", "--data-dir", t.TempDir(), "--periods", "2", "--period", "300ms")
	r.want(t, 0, "ran exactly once in each of 2 periods", "replica")
}

type lockJSON struct {
	Kind, Key, Owner, Host string
	Token                  int64
	Acquired, Expires      time.Time
}

func listLocksJSON(t *testing.T, dsn string) map[string]lockJSON {
	t.Helper()
	r := sqllockCmd(t, "locks", "--json", "--dsn", dsn)
	r.want(t, 0)
	out := map[string]lockJSON{}
	for _, l := range decode[[]lockJSON](t, r) {
		out[l.Key] = l
	}
	return out
}

// TestLocksForceRelease: a lock held by another process shows in `locks`
// with its owner, host and token; release refuses without --force; with it
// the lock is freed and the holder's lease reports the loss.
func TestLocksForceRelease(t *testing.T) {
	forEachDB(t, func(t *testing.T, d dbTarget) {
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0)
		key := fmt.Sprintf("orders/%x", rand.Uint64())
		// A TTL with room for a loaded machine, where each command below
		// connects anew.
		holder := exec.Command(bin, "hold", key, "--ttl", "5s", "--for", "2m", "--owner", "billing-worker-7", "--dsn", d.dsn)
		holder.Env = append(os.Environ(), "SQLLOCK_DSN=")
		out, err := holder.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		holder.Stderr = &stderr
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
		lines := make(chan string, 10)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		select {
		case l := <-lines:
			if !strings.HasPrefix(l, "held") {
				t.Fatalf("holder said %q, want held", l)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the holder never took the lock")
		}

		l, ok := listLocksJSON(t, d.dsn)[key]
		if !ok {
			t.Fatalf("locks does not list %q", key)
		}
		if l.Kind != "lock" || l.Owner != "billing-worker-7" || !strings.HasSuffix(l.Host, fmt.Sprintf("/%d", holder.Process.Pid)) || l.Token <= 0 || !l.Expires.After(l.Acquired) {
			t.Errorf("locks lists %+v; want owner billing-worker-7, host ending /%d, a token, expiry after acquisition", l, holder.Process.Pid)
		}
		human := sqllockCmd(t, "locks", "--dsn", d.dsn)
		human.want(t, 0, key, "billing-worker-7", fmt.Sprint(l.Token))

		// Without --force: says what it would do, does nothing.
		sqllockCmd(t, "locks", "release", key, "--dsn", d.dsn).want(t, exitUsage, "--force", "billing-worker-7", "ErrLockLost")
		if _, ok := listLocksJSON(t, d.dsn)[key]; !ok {
			t.Fatal("release without --force freed the lock")
		}

		// --force without --reason: refused, nothing freed.
		sqllockCmd(t, "locks", "release", key, "--force", "--dsn", d.dsn).want(t, exitUsage, "--reason", key)
		if _, ok := listLocksJSON(t, d.dsn)[key]; !ok {
			t.Fatal("release --force without --reason freed the lock")
		}

		sqllockCmd(t, "locks", "release", key, "--force", "--reason", "INC-7 hung holder", "--dsn", d.dsn).want(t, 0, "released lock", "audit")
		if _, ok := listLocksJSON(t, d.dsn)[key]; ok {
			t.Fatal("the lock is still listed after release --force")
		}
		var audited []auditRow
		for _, a := range decode[[]auditRow](t, sqllockCmd(t, "locks", "--audit", "--json", "--dsn", d.dsn)) {
			if a.Key == key {
				audited = append(audited, a)
			}
		}
		if len(audited) != 1 {
			t.Fatalf("locks --audit lists %d records of %q, want 1: %+v", len(audited), key, audited)
		}
		a := audited[0]
		if a.Action != "force-release" || a.Owner != "billing-worker-7" || a.Token != l.Token || a.Host != l.Host ||
			a.Reason != "INC-7 hung holder" || a.Operator == "" || a.Operator == l.Host || a.At.IsZero() {
			t.Errorf("audit record %+v; want the holder shown (%s, token %d, host %s), another operator, the reason", a, l.Owner, l.Token, l.Host)
		}
		sqllockCmd(t, "locks", "--audit", "--dsn", d.dsn).want(t, 0, key, "INC-7 hung holder", "billing-worker-7")
		done := make(chan error, 1)
		go func() { done <- holder.Wait() }()
		var said []string
		for l := range lines {
			said = append(said, l)
		}
		select {
		case err := <-done:
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailure {
				t.Errorf("holder exited with %v, want exit code %d", err, exitFailure)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the holder did not learn of the loss")
		}
		if !strings.Contains(stderr.String(), "lost") || !strings.Contains(stderr.String(), "lock lost") {
			t.Errorf("holder output %q / %q; want it to report the loss", said, stderr.String())
		}
		sqllockCmd(t, "locks", "release", key, "--force", "--reason", "again", "--dsn", d.dsn).want(t, exitFailure, "not held")
	})
}

type benchJSON struct {
	Results []struct {
		Strategy  string     `json:"strategy"`
		Operation string     `json:"operation"`
		RawSQL    string     `json:"raw_sql"`
		NoHandoff string     `json:"no_handoff"`
		Lib       benchSideJ `json:"sqllock"`
		Raw       benchSideJ `json:"raw"`
		Ratio     float64    `json:"uncontended_ratio"`
		HotRatio  float64    `json:"hot_key_ratio"`
		Multi     *struct {
			Clients   int         `json:"clients"`
			RawSQL    string      `json:"raw_sql"`
			Lib       multiSideJ  `json:"sqllock"`
			Raw       multiSideJ  `json:"raw"`
			ManyRatio float64     `json:"distinct_n_clients_ratio"`
			Fair      *multiSideJ `json:"fair"`
			FairRatio float64     `json:"fair_hot_key_ratio"`
			Bare      *multiSideJ `json:"without_token"`
			BareOne   float64     `json:"without_token_distinct_1_client_ratio"`
			BareMany  float64     `json:"without_token_distinct_n_clients_ratio"`
			BareHot   float64     `json:"without_token_hot_key_ratio"`
		} `json:"multi_client"`
	} `json:"results"`
	Skipped []struct{ Strategy, Reason string } `json:"skipped"`
}

type multiSideJ struct {
	One     float64   `json:"distinct_1_client_per_sec"`
	Many    float64   `json:"distinct_n_clients_per_sec"`
	Hot     float64   `json:"hot_key_per_sec"`
	Served  int       `json:"hot_key_clients_served"`
	Shares  []float64 `json:"hot_key_shares"`
	Busiest float64   `json:"hot_key_busiest_share"`
	P50     float64   `json:"xproc_handoff_p50_ms"`
	P99     float64   `json:"xproc_handoff_p99_ms"`
	Missed  int       `json:"xproc_handoff_missed"`
	Idle    *float64  `json:"idle_waiter_queries_per_sec"`
}

type benchSideJ struct {
	Uncontended float64  `json:"uncontended_per_sec"`
	HotKey      float64  `json:"hot_key_per_sec"`
	Served      int      `json:"hot_key_clients_served"`
	P50         *float64 `json:"handoff_p50_ms"`
	P99         *float64 `json:"handoff_p99_ms"`
	Missed      *int     `json:"handoff_missed"`
	Retries     *float64 `json:"hot_key_retries_per_op"`
}

// checkBench checks that every strategy of want was measured on both
// sides, with figures that a real measurement gives: rates and ratios
// above zero, a handoff for the locks and none for optimistic, which
// counts retries instead.
func checkBench(t *testing.T, r result, d sqllock.Dialect, want []string) benchJSON {
	t.Helper()
	r.want(t, 0)
	rep := decode[benchJSON](t, r)
	var ran []string
	for _, res := range rep.Results {
		ran = append(ran, res.Strategy)
		for name, sd := range map[string]benchSideJ{"sqllock": res.Lib, "raw": res.Raw} {
			if sd.Uncontended <= 0 || sd.HotKey <= 0 || sd.Served < 1 {
				t.Errorf("%s, %s: implausible figures %+v", res.Strategy, name, sd)
			}
			switch {
			case res.Strategy == "optimistic":
				if sd.P50 != nil || sd.P99 != nil || sd.Retries == nil {
					t.Errorf("optimistic, %s: handoff %v/%v, retries %v; want no handoff and a retry count", name, sd.P50, sd.P99, sd.Retries)
				}
			case sd.P50 == nil || sd.P99 == nil || sd.Missed == nil:
				t.Errorf("%s, %s: no handoff figures", res.Strategy, name)
			case *sd.P50 <= 0 || *sd.P99 < *sd.P50 || *sd.Missed != 0:
				t.Errorf("%s, %s: handoff p50 %v, p99 %v, %d missed", res.Strategy, name, *sd.P50, *sd.P99, *sd.Missed)
			}
		}
		if res.Ratio <= 0 || res.HotRatio <= 0 || res.Operation == "" || res.RawSQL == "" {
			t.Errorf("%s: ratio %v, hot-key ratio %v, operation %q, raw SQL %q", res.Strategy, res.Ratio, res.HotRatio, res.Operation, res.RawSQL)
		}
		if (res.Strategy == "optimistic") != (res.NoHandoff != "") {
			t.Errorf("%s: no_handoff %q", res.Strategy, res.NoHandoff)
		}
		// The multi-client cases: tablelock and advisory, a pool per client,
		// the handoff's waiter in a child process.
		hasMulti := res.Strategy == "tablelock" || res.Strategy == "advisory"
		if (res.Multi != nil) != hasMulti {
			t.Errorf("%s: multi-client figures %v, want them: %v", res.Strategy, res.Multi != nil, hasMulti)
			continue
		}
		if res.Multi == nil {
			continue
		}
		m := res.Multi
		if m.RawSQL == "" || m.ManyRatio <= 0 {
			t.Errorf("%s multi: raw SQL %q, ratio %v", res.Strategy, m.RawSQL, m.ManyRatio)
		}
		// Fair order: tablelock on PostgreSQL, the hot key alone.
		if wantFair := res.Strategy == "tablelock" && d == sqllock.Postgres; (m.Fair != nil) != wantFair {
			t.Errorf("%s multi: fair-order figures %v, want them: %v", res.Strategy, m.Fair != nil, wantFair)
		} else if f := m.Fair; f != nil && (f.Hot <= 0 || m.FairRatio <= 0 || f.Served < 1 || len(f.Shares) != m.Clients) {
			t.Errorf("%s multi, fair order: implausible figures %+v, ratio %v", res.Strategy, *f, m.FairRatio)
		}
		// Without a token: advisory, beside the default, the rates alone.
		if wantBare := res.Strategy == "advisory"; (m.Bare != nil) != wantBare {
			t.Errorf("%s multi: figures without a token %v, want them: %v", res.Strategy, m.Bare != nil, wantBare)
		} else if b := m.Bare; b != nil && (b.One <= 0 || b.Many <= 0 || b.Hot <= 0 || b.Served < 1 || m.BareOne <= 0 || m.BareMany <= 0 || m.BareHot <= 0) {
			t.Errorf("%s multi, without a token: implausible figures %+v, ratios %v %v %v", res.Strategy, *b, m.BareOne, m.BareMany, m.BareHot)
		}
		for name, sd := range map[string]multiSideJ{"sqllock": m.Lib, "raw": m.Raw} {
			var total float64
			for _, x := range sd.Shares {
				total += x
				if x > sd.Busiest+1e-9 {
					t.Errorf("%s multi, %s: share %v above the busiest %v", res.Strategy, name, x, sd.Busiest)
				}
			}
			switch {
			case sd.One <= 0 || sd.Many <= 0 || sd.Hot <= 0 || sd.Served < 1:
				t.Errorf("%s multi, %s: implausible rates %+v", res.Strategy, name, sd)
			case len(sd.Shares) != m.Clients || total < 0.99 || total > 1.01:
				t.Errorf("%s multi, %s: shares %v of %d clients", res.Strategy, name, sd.Shares, m.Clients)
			case sd.P50 <= 0 || sd.P99 < sd.P50 || sd.Missed != 0:
				t.Errorf("%s multi, %s: handoff p50 %v, p99 %v, %d missed", res.Strategy, name, sd.P50, sd.P99, sd.Missed)
			case sd.Idle == nil || *sd.Idle < 0:
				t.Errorf("%s multi, %s: idle waiter load %v", res.Strategy, name, sd.Idle)
			}
		}
	}
	if !slices.Equal(ran, want) {
		t.Errorf("strategies measured: %v, want %v", ran, want)
	}
	return rep
}

func TestBench(t *testing.T) {
	short := []string{"--duration", "200ms", "--handoffs", "5", "--clients", "3", "--idle", "200ms", "--json"}
	t.Run("sqlite", func(t *testing.T) {
		rep := checkBench(t, sqllockCmd(t, append([]string{"bench", "--data-dir", t.TempDir()}, short...)...), sqllock.SQLite, onSQLite)
		var skipped []string
		for _, s := range rep.Skipped {
			skipped = append(skipped, s.Strategy)
			if !strings.Contains(s.Reason, "unsupported on sqlite") {
				t.Errorf("%s skipped for %q, want the dialect named", s.Strategy, s.Reason)
			}
		}
		if !slices.Equal(skipped, notSQLite) {
			t.Errorf("skipped %v, want %v", skipped, notSQLite)
		}
		human := sqllockCmd(t, "bench", "--data-dir", t.TempDir(), "--duration", "100ms", "--handoffs", "3", "--clients", "2")
		human.want(t, 0, "uncontended acquire+release", "handoff p99", "raw SQL", "retries per op", "summary", "advisory: skipped",
			"multi-client", "busiest share", "handoff p50, other process", "idle waiter")
	})
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB} {
		t.Run(d.String(), func(t *testing.T) {
			tg := migrated(t, d)
			checkBench(t, sqllockCmd(t, append([]string{"bench", "--dsn", tg.dsn}, short...)...), d, onServers)
			// What the bench made is gone: rowlock's rows and the CAS items.
			for _, table := range []string{"sqllock_demo_stock", "sqllock_rows"} {
				var n int
				if err := tg.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Errorf("%d rows left in %s after the bench", n, table)
				}
			}
			// And no session is left holding an advisory lock.
			if d == sqllock.Postgres {
				var n int
				if err := tg.db.QueryRow("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Errorf("%d advisory locks held after the bench", n)
				}
			}
		})
	}
}

// heldToken runs `hold KEY` briefly and returns the token it was given.
func heldToken(t *testing.T, args ...string) int64 {
	t.Helper()
	r := sqllockCmd(t, append([]string{"hold", "k", "--for", "1ms"}, args...)...)
	r.want(t, 0, "held")
	var key string
	var token int64
	if _, err := fmt.Sscanf(r.stdout, "held %q token %d", &key, &token); err != nil {
		t.Fatalf("hold said %q: %v", r.stdout, err)
	}
	return token
}

// TestDataDirNames: data folders whose names differ only after a '#', by a
// '%xx' escape or after a '?' are separate databases, with their own files
// and their own fencing tokens; demo workers in child processes find the
// same file as their parent.
func TestDataDirNames(t *testing.T) {
	root := t.TempDir()
	for _, pair := range [][2]string{{"team#1", "team#2"}, {"pct%41", "pctA"}, {"q?1", "q?2"}} {
		a, b := filepath.Join(root, pair[0]), filepath.Join(root, pair[1])
		first := heldToken(t, "--data-dir", a)
		heldToken(t, "--data-dir", a)
		if other := heldToken(t, "--data-dir", b); other != first {
			t.Errorf("--data-dir %s: first token %d, and %d in %s: the two share a database", pair[1], other, first, pair[0])
		}
		for _, dir := range []string{a, b} {
			if _, err := os.Stat(filepath.Join(dir, "sqllock.db")); err != nil {
				t.Errorf("no database file in %s: %v", dir, err)
			}
		}
	}
	var names []string
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"pct%41", "pctA", "q?1", "q?2", "team#1", "team#2"}; !slices.Equal(names, want) {
		t.Errorf("files beside the data folders: %q, want only %q", names, want)
	}
	r := sqllockCmd(t, "demo", "stock", "--data-dir", filepath.Join(root, "q?1"), "--strategy", "tablelock", "--procs", "2", "--workers", "2", "--units", "20", "--json")
	r.want(t, 0)
	if rep := decode[stockJSON](t, r); len(rep.Results) != 1 || rep.Results[0].Sold != 20 || rep.Results[0].Oversold != 0 {
		t.Errorf("demo stock in a '?' folder with 2 processes: %+v, want 20 sold, none oversold", rep.Results)
	}
}

// TestEmbeddedConcurrentStart: processes started at once on a fresh
// embedded database all succeed. The first ones create the file and switch
// it to WAL while the others connect; SQLite answers some of them busy at
// once, without waiting out its busy timeout.
func TestEmbeddedConcurrentStart(t *testing.T) {
	const rounds, procs = 6, 40
	for round := range rounds {
		dir := filepath.Join(t.TempDir(), "fresh")
		var wg sync.WaitGroup
		results := make([]result, procs)
		for i := range procs {
			wg.Go(func() { results[i] = sqllockCmd(t, "locks", "--data-dir", dir) })
		}
		wg.Wait()
		for i, r := range results {
			if r.code != 0 {
				t.Errorf("round %d, process %d: exit %d: %s", round, i, r.code, r.stderr)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// TestMigrateDownNeedsForce: migrate down drops the fence table and (with
// --all) the fencing sequence, so it refuses without --force, says what it
// would drop and what that costs, and changes nothing.
func TestMigrateDownNeedsForce(t *testing.T) {
	forEachDB(t, func(t *testing.T, d dbTarget) {
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0)
		before := d.tables(t)
		last := "sqllock_fence_tokens"
		newest := newestMigration(t, d.dialect)
		sqllockCmd(t, "migrate", "down", "--dsn", d.dsn).want(t, exitUsage, "--force", newest)
		drops := []string{"--force", "--all", "sqllock_locks", "sqllock_versions", "sqllock_jobs", last, "restart", "stale"}
		if d.dialect == sqllock.SQLite {
			drops = append(drops, "sqllock_fence")
		} else {
			drops = append(drops, "sqllock_rows", "sequence sqllock_fence_seq")
		}
		sqllockCmd(t, "migrate", "down", "--all", "--dsn", d.dsn).want(t, exitUsage, drops...)
		if n := d.tables(t); n != before {
			t.Fatalf("%d tables after refused downs, want the %d there were", n, before)
		}
		sqllockCmd(t, "migrate", "status", "--dsn", d.dsn).want(t, 0, "up to date")
		sqllockCmd(t, "migrate", "down", "--force", "--dsn", d.dsn).want(t, 0, "rolled back "+newest)
	})
}

// newestMigration is the file name of d's last migration.
func newestMigration(t *testing.T, d sqllock.Dialect) string {
	t.Helper()
	dir, err := migrations.Dir(d)
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(migrations.FS, dir+"/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("%v: no migrations (%v)", d, err)
	}
	return path.Base(files[len(files)-1])
}
