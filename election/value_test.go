package election_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// TestCampaignValueRefused: a value some dialect's column cannot hold as
// given (64 KiB, past MariaDB's TEXT; not UTF-8; a NUL byte, which
// PostgreSQL's text refuses) is refused on every dialect with an error
// matching ErrInvalidOption that names the election and the cause, before
// anything is written: no lease row, no term row, and no token drawn (in a
// database of its own, the next leader's term follows the last one's as
// the last one's followed the one before).
// A value of 65,535 bytes, the most every dialect holds, is stored as
// given.
func TestCampaignValueRefused(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, shared *testdb.DB) {
		ctx := context.Background()
		db := testdb.Scratch(t, shared.Dialect)
		if err := migrations.Up(ctx, db.DB, db.Dialect); err != nil {
			t.Fatal(err)
		}
		e := newElection(t, db)
		const name = "refused"
		var terms [2]int64
		for i := range terms {
			lead, err := e.Campaign(ctx, name, "ok")
			if err != nil {
				t.Fatal(err)
			}
			if err := lead.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			terms[i] = lead.Term()
		}
		step := terms[1] - terms[0] // tokens a campaign draws
		rows := func() string {
			t.Helper()
			var termRows, locks int
			var q1, q2 string
			switch db.Dialect {
			case sqllock.Postgres:
				q1 = `SELECT count(*) FROM sqllock_elections WHERE name = $1`
				q2 = `SELECT count(*) FROM sqllock_locks WHERE lock_key = $1 AND expires_at > now()`
			case sqllock.SQLite:
				q1 = `SELECT count(*) FROM sqllock_elections WHERE name = ?`
				q2 = `SELECT count(*) FROM sqllock_locks WHERE lock_key = ? AND expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)`
			default:
				q1 = `SELECT count(*) FROM sqllock_elections WHERE name = ?`
				q2 = `SELECT count(*) FROM sqllock_locks WHERE lock_key = ? AND expires_at > UTC_TIMESTAMP(6)`
			}
			if err := db.QueryRowContext(ctx, q1, name).Scan(&termRows); err != nil {
				t.Fatal(err)
			}
			if err := db.QueryRowContext(ctx, q2, election.KeyPrefix+name).Scan(&locks); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%d term rows, %d live leases", termRows, locks)
		}
		was := rows()
		for _, c := range []struct{ what, value, cause string }{
			{"64 KiB", strings.Repeat("v", 1<<16), "65535"},
			{"not UTF-8", "caf\xe9", "UTF-8"},
			{"a NUL byte", "a\x00b", "NUL"},
		} {
			lead, err := e.Campaign(ctx, name, c.value)
			if err == nil {
				_ = lead.Resign(ctx)
			}
			if !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), `"`+name+`"`) || !strings.Contains(err.Error(), c.cause) {
				t.Errorf("Campaign with a value of %s: %v; want ErrInvalidOption naming %q and %q", c.what, err, name, c.cause)
			}
			if now := rows(); now != was {
				t.Errorf("Campaign with a value of %s left %s, had %s", c.what, now, was)
			}
		}
		most := strings.Repeat("é", 32767) + "v" // 65,535 bytes
		after, err := e.Campaign(ctx, name, most)
		if err != nil {
			t.Fatal(err)
		}
		defer after.Resign(ctx)
		if after.Term() != terms[1]+step {
			t.Errorf("the next term is %d after %d, %d: the refused campaigns drew %d tokens", after.Term(), terms[0], terms[1], after.Term()-terms[1]-step)
		}
		if ld, err := e.Leader(ctx, name); err != nil || ld.Value != most {
			t.Errorf("Leader after a value of 65,535 bytes: %d bytes, %v; want it as given", len(ld.Value), err)
		}
	})
}

// TestCampaignNonStrictSession: on MariaDB, in sessions whose sql_mode is
// not strict (set in the DSN) and a database whose default character set
// is latin1, a leadership's value is stored exactly as given or the
// campaign is refused, leaving no term and a free lease; never stored
// altered for Leader to return.
func TestCampaignNonStrictSession(t *testing.T) {
	d := testdb.MySQL()
	ctx := context.Background()
	shared := testdb.Open(t, d)
	cfg, err := mysql.ParseDSN(shared.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = fmt.Sprintf("sqllock_latin1_%d_%d", os.Getpid(), latin1Seq.Add(1))
	if _, err := shared.ExecContext(ctx, "CREATE DATABASE "+cfg.DBName+" CHARACTER SET latin1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.Exec("DROP DATABASE " + cfg.DBName) })
	cfg.Params = map[string]string{"sql_mode": "'NO_ENGINE_SUBSTITUTION'"}
	h, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	db := &testdb.DB{DB: h, Dialect: d, Driver: "mysql", DSN: cfg.FormatDSN()}
	if err := migrations.Up(ctx, db.DB, d); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil || strings.Contains(mode, "STRICT") {
		t.Fatalf("the session's sql_mode is %q, %v; want one not strict", mode, err)
	}
	e := newElection(t, db)
	for i, c := range []struct {
		value string
		store bool // on the MariaDB path, which makes its statement strict
	}{
		{"Zürich", true},                     // latin1 holds it
		{"東京 ✓ 😀", false},                    // latin1 does not
		{strings.Repeat("v", 1<<16), false},  // past TEXT: truncated when not strict
		{"caf\xe9", false},                   // not UTF-8: '?' when not strict
		{strings.Repeat("v", 1<<16-1), true}, // the most TEXT holds
	} {
		v := c.value
		name := fmt.Sprintf("nonstrict-%d", i)
		lead, err := e.Campaign(ctx, name, v)
		if err != nil {
			if c.store && d == sqllock.MariaDB {
				t.Errorf("value %d refused on the MariaDB path: %v", i, err)
			}
			if !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Errorf("value %d: refused with %v, want an error matching ErrInvalidOption", i, err)
			}
			var terms int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqllock_elections WHERE name = ?", name).Scan(&terms); err != nil {
				t.Fatal(err)
			}
			if _, lerr := e.Leader(ctx, name); terms != 0 || !errors.Is(lerr, election.ErrNoLeader) {
				t.Errorf("value %d refused (%v) but %d term rows left, Leader: %v", i, err, terms, lerr)
			}
			t.Logf("value %d refused: %v", i, err)
			continue
		}
		ld, err := e.Leader(ctx, name)
		if err != nil || ld.Value != v {
			t.Errorf("value %d (%d bytes) stored as %d bytes %.40q (%v), want it exactly as given", i, len(v), len(ld.Value), ld.Value, err)
		}
		if err := lead.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

var latin1Seq atomic.Int64
