package main

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/cmd/sqllock/internal/bench"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// TestPoolerParam: sqllock_pooler=transaction in a PostgreSQL DSN, URL or
// keyword form, marks the target and never reaches the driver (which
// would send it to the server, or the proxy, as a setting); pgx is told
// not to prepare. Any other value, or the parameter on MySQL, is refused
// with its name.
func TestPoolerParam(t *testing.T) {
	for _, tc := range []struct{ in, want, refuse string }{
		{in: "postgres://u@h:6432/db?sqllock_pooler=transaction", want: "postgres://u@h:6432/db?default_query_exec_mode=exec"},
		{in: "postgres://u@h:6432/db?sslmode=disable&sqllock_pooler=transaction&connect_timeout=5", want: "postgres://u@h:6432/db?sslmode=disable&connect_timeout=5&default_query_exec_mode=exec"},
		{in: "postgres://u@h/db?sqllock_pooler=transaction&default_query_exec_mode=simple_protocol", want: "postgres://u@h/db?default_query_exec_mode=simple_protocol"},
		{in: "host=h port=6432 dbname=db sqllock_pooler=transaction sslmode=disable", want: "host=h port=6432 dbname=db sslmode=disable default_query_exec_mode=exec"},
		{in: "postgres://u@h/db?sqllock_pooler=session", refuse: "sqllock_pooler=session"},
		{in: "mysql://root@127.0.0.1:3306/db?sqllock_pooler=transaction", refuse: "sqllock_pooler"},
	} {
		got, err := parseDSN(tc.in)
		if tc.refuse != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refuse) {
				t.Errorf("parseDSN(%q) = %v; want an error naming %q", tc.in, err, tc.refuse)
			}
			continue
		}
		if err != nil || !got.pooler || got.dsn != tc.want {
			t.Errorf("parseDSN(%q) = pooler %v, dsn %q, %v; want pooler, dsn %q", tc.in, got.pooler, got.dsn, err, tc.want)
		}
	}
	if got, err := parseDSN("postgres://u@h/db"); err != nil || got.pooler {
		t.Errorf("a DSN without the parameter: pooler %v, %v", got.pooler, err)
	}
}

// withPooler adds sqllock_pooler=transaction to a PostgreSQL URL.
func withPooler(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sqllock_pooler", "transaction")
	u.RawQuery = q.Encode()
	return u.String()
}

// checkPoolerCommands runs the commands through dsn, a PostgreSQL DSN with
// sqllock_pooler=transaction: the stock demo sells exactly the stock with
// none oversold for every strategy, and the job demo runs its job exactly
// once a period, in each number of processes of procs; locks lists;
// migrate refuses at once, saying why; bench measures every strategy, the
// raw sides unprepared.
func checkPoolerCommands(t *testing.T, dsn string, procs ...string) {
	t.Helper()
	for _, procs := range procs {
		r := sqllockCmd(t, "demo", "stock", "--dsn", dsn, "--units", "60", "--workers", "4", "--procs", procs, "--json")
		r.want(t, 0)
		rep := decode[stockReport](t, r)
		t.Logf("demo stock --procs %s through the pooler: %+v", procs, rep.Results)
		got := map[string]bool{}
		for _, res := range rep.Results {
			got[res.Strategy] = true
			if res.Sold != 60 || res.Oversold != 0 || res.Left != 0 {
				t.Errorf("%s (procs %s): sold %d, left %d, oversold %d; want 60 sold, none left, 0 oversold", res.Strategy, procs, res.Sold, res.Left, res.Oversold)
			}
		}
		for _, s := range []string{"tablelock", "rowlock", "optimistic", "advisory"} {
			if !got[s] {
				t.Errorf("demo stock through the pooler did not run %s: %+v (skipped %+v)", s, rep.Results, rep.Skipped)
			}
		}
	}
	for _, procs := range procs {
		r := sqllockCmd(t, "demo", "job", "--dsn", dsn, "--replicas", "3", "--periods", "2", "--procs", procs, "--json")
		r.want(t, 0)
		rep := decode[jobReport](t, r)
		t.Logf("demo job --procs %s through the pooler: %+v", procs, rep.Periods)
		if !rep.OK || len(rep.Periods) < 2 {
			t.Errorf("demo job (procs %s): %+v; want one run in each of 2 periods", procs, rep.Periods)
		}
	}
	sqllockCmd(t, "locks", "--dsn", dsn).want(t, 0)
	sqllockCmd(t, "migrate", "up", "--dsn", dsn).want(t, exitUnsupported, "session-level lock", "sqllock_pooler")
	sqllockCmd(t, "migrate", "status", "--dsn", dsn).want(t, 0)
	r := sqllockCmd(t, "bench", "--dsn", dsn, "--duration", "100ms", "--handoffs", "3", "--clients", "2", "--idle", "100ms", "--json")
	r.want(t, 0)
	rep := decode[bench.Report](t, r)
	if !rep.Pooler || len(rep.Skipped) != 0 {
		t.Errorf("bench through the pooler: pooler %v, skipped %+v; want the pooler's forms of every strategy", rep.Pooler, rep.Skipped)
	}
	got := map[string]bool{}
	for _, res := range rep.Results {
		got[res.Strategy] = true
		t.Logf("bench %s through the pooler: %s / raw %s: %.0f/s, %.0f/s", res.Strategy, res.Operation, res.RawSQL, res.Lib.UncontendedPerSec, res.Raw.UncontendedPerSec)
		if res.Lib.UncontendedPerSec <= 0 || res.Raw.UncontendedPerSec <= 0 || res.Lib.HotKeyServed == 0 || res.Raw.HotKeyServed == 0 {
			t.Errorf("bench %s through the pooler measured nothing on a side: %+v", res.Strategy, res)
		}
		if !strings.Contains(res.RawSQL, "unprepared") {
			t.Errorf("bench %s: raw side %q; want it unprepared through the pooler", res.Strategy, res.RawSQL)
		}
		if m := res.Multi; m != nil && (m.Lib.OnePerSec <= 0 || m.Raw.OnePerSec <= 0) {
			t.Errorf("bench %s, multi-client, measured nothing on a side: %+v", res.Strategy, m)
		}
	}
	for _, s := range []string{"tablelock", "rowlock", "optimistic", "advisory"} {
		if !got[s] {
			t.Errorf("bench through the pooler did not run %s: %+v", s, rep.Results)
		}
	}
}

// TestTransactionPoolerCommands: with sqllock_pooler=transaction, every
// Locker the command builds runs in the pooler mode; here straight to
// PostgreSQL, where the mode must work as well (TestPgBouncerCommands
// runs the same through PgBouncer).
func TestTransactionPoolerCommands(t *testing.T) {
	d := migrated(t, sqllock.Postgres)
	checkPoolerCommands(t, withPooler(t, d.dsn), "1", "2")
}

// TestPgBouncerCommands: the stock demo through PgBouncer in transaction
// mode (.ci/step-pgbouncer) sells exactly the stock with none oversold for
// every strategy, and locks works through it. Without the parameter the
// demo fails there ("prepared statement ... already exists").
func TestPgBouncerCommands(t *testing.T) {
	proxy := os.Getenv(testdb.EnvPgBouncer)
	if proxy == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s unset and CI=true", testdb.EnvPgBouncer)
		}
		t.Skipf("SKIPPING PGBOUNCER TESTS: %s unset (.ci/pgbouncer up; eval \"$(.ci/pgbouncer env)\")", testdb.EnvPgBouncer)
	}
	d := migrated(t, sqllock.Postgres)
	// The same private database, through the proxy (it passes any
	// database name through).
	direct, err := url.Parse(d.dsn)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(proxy)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = direct.Path
	q := u.Query()
	q.Del("default_query_exec_mode") // the parameter alone must do
	u.RawQuery = q.Encode()
	checkPoolerCommands(t, withPooler(t, u.String()), "1", "2")
}
