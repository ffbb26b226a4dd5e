package dialect

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	_ "modernc.org/sqlite" // driver "sqlite", for ExecScript

	"github.com/sqllock/sqllock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestToTime(t *testing.T) {
	want := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	berlin := time.FixedZone("CEST", 2*3600)
	for _, tc := range []struct {
		name string
		in   any
		want time.Time
	}{
		{"time.Time in another zone", want.In(berlin), want},
		{"int64 microseconds", want.UnixMicro(), want},
		{"text", "2024-05-06 07:08:09.123456", want},
		{"bytes", []byte("2024-05-06 07:08:09.123456"), want},
		{"text without fraction", "2024-05-06 07:08:09", want.Truncate(time.Second)},
		{"unparsable text", "yesterday", time.Time{}},
		{"NULL", nil, time.Time{}},
		{"other type", 1.5, time.Time{}},
	} {
		got := ToTime(tc.in)
		if !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("%s: ToTime(%#v) = %v, want %v in UTC", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestExecScript(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "script.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	script := "CREATE TABLE a (x INTEGER);\n\nCREATE INDEX a_x ON a (x);\n  ;\n"
	if err := ExecScript(ctx, db, script); err != nil {
		t.Fatalf("ExecScript: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name IN ('a', 'a_x')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("the script made %d of its 2 objects", n)
	}

	// The first failure is returned, and what follows it is not run.
	if err := ExecScript(ctx, db, "CREATE TABLE a (x INTEGER); CREATE TABLE b (y INTEGER);"); err == nil {
		t.Fatal("ExecScript of a failing statement returned nil")
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'b'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("ExecScript ran on past a failed statement")
	}
}

// A channel name is an identifier of at most 63 bytes: a table's notify
// channel fits, and so does its call channel with a Locker's 16-character
// id after it, for short and long table names; distinct tables keep
// distinct channels, and the two kinds never meet.
func TestChannels(t *testing.T) {
	long := strings.Repeat("t", 63)
	for _, table := range []string{"sqllock_locks", "MixedCase", strings.Repeat("m", 45), long, long + "x"} {
		n, c := NotifyChannel(table), CallChannel(table)
		if len(n) > 63 || len(c)+16 > 63 {
			t.Errorf("%q: channels %q (%d) and %q (%d, +16 for the id): over 63 bytes", table, n, len(n), c, len(c))
		}
		if strings.HasPrefix(n, c) || strings.HasPrefix(c, n) {
			t.Errorf("%q: notify channel %q and call channel %q overlap", table, n, c)
		}
	}
	if CallChannel(long) == CallChannel(long+"x") {
		t.Errorf("two long table names share the call channel %q", CallChannel(long))
	}
	if got := CallChannel("sqllock_locks"); got != "sqllock>sqllock_locks" {
		t.Errorf("CallChannel(sqllock_locks) = %q, want it readable, the table's name after the prefix", got)
	}
}

// Every dialect has its row in the table, and only the MySQL family
// reads its server; an unknown dialect can do nothing.
func TestCaps(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.SQLite, sqllock.MySQL} {
		c := Of(d)
		if c.Name == "" || c.MigrationDir == "" || c.quote == "" {
			t.Errorf("%v: %+v lacks a name, a migration folder or a quote", d, c)
		}
		if c.ProbesServer != d.IsMySQL() {
			t.Errorf("%v: ProbesServer %v; want it on the MySQL family alone", d, c.ProbesServer)
		}
		if c.Sequences == c.TicketTokens && d != sqllock.SQLite {
			t.Errorf("%v: tokens from sequences %v, from tickets %v; want one source", d, c.Sequences, c.TicketTokens)
		}
	}
	if Of(0) != (Caps{}) || Of(42) != (Caps{}) {
		t.Errorf("an unknown dialect has capabilities: %+v", Of(42))
	}
	if p, q := Of(sqllock.Postgres).Param(2), Of(sqllock.MariaDB).Param(2); p != "$2" || q != "?" {
		t.Errorf("Param(2) = %q on PostgreSQL, %q on MariaDB; want $2 and ?", p, q)
	}
}
