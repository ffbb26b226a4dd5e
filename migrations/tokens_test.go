package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/tablelock"
)

// Migration 00011: PostgreSQL tokens are the timeline in the high bits over
// the sequence, above every token drawn before the migration, and a
// sequence past 2^40 is refused rather than wrapped into a smaller token
// (by the sequence's MAXVALUE since migration 00014).
// (TestFailover shows the timeline changing on a promotion.)
func TestTokenCarriesTimeline(t *testing.T) {
	ctx := context.Background()
	db := testdb.Scratch(t, sqllock.Postgres)
	p, err := migrations.NewProvider(db.DB, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 7); err != nil {
		t.Fatal(err)
	}
	var before int64
	for range 40 {
		if err := db.QueryRowContext(ctx, `SELECT nextval('sqllock_fence_seq')`).Scan(&before); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.Up(ctx, db.DB, sqllock.Postgres); err != nil {
		t.Fatal(err)
	}
	var tok, timeline int64
	err = db.QueryRowContext(ctx, `SELECT sqllock_next_token(),
		('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint`).Scan(&tok, &timeline)
	if err != nil {
		t.Fatal(err)
	}
	if timeline < 1 || tok>>40 != timeline || tok&(1<<40-1) != before+1 {
		t.Fatalf("token %#x: want timeline %d in bits 40 and up over sequence value %d", tok, timeline, before+1)
	}
	if tok <= before {
		t.Fatalf("token %d after the migration not above %d before it", tok, before)
	}

	// Migration 00014: the function is one SQL expression, which the
	// planner inlines into the calling statement (no function call per
	// token), and the sequence's MAXVALUE refuses values past 2^40.
	// Migration 00019's sequence half, and 00020's drawn without waiting
	// for the flush, are inlined the same way.
	for _, fn := range []string{"sqllock_next_token", "sqllock_next_token_counter", "sqllock_next_token_async"} {
		var plan strings.Builder
		rows, err := db.QueryContext(ctx, `EXPLAIN (VERBOSE) SELECT `+fn+`()`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if p := plan.String(); strings.Contains(p, fn) || !strings.Contains(p, "nextval") {
			t.Fatalf("%s is not inlined into the statement:\n%s", fn, p)
		}
	}
	err = db.QueryRowContext(ctx, `SELECT sqllock_refuse_token('timeline')`).Scan(&tok)
	if err == nil || !strings.Contains(err.Error(), "fencing token out of range: timeline") {
		t.Fatalf("the timeline refusal = %d, %v; want the out of range error", tok, err)
	}

	// Since migration 00021 the sequence keeps the lower part of the
	// range below 2^40 (the era tokens' sequence has the rest).
	var maxv int64
	if err := db.QueryRowContext(ctx, `SELECT setval('sqllock_fence_seq', max_value) FROM pg_sequences WHERE sequencename = 'sqllock_fence_seq'`).Scan(&maxv); err != nil {
		t.Fatal(err)
	}
	if maxv >= 1<<40 {
		t.Fatalf("sqllock_fence_seq's MAXVALUE %d is past 2^40", maxv)
	}
	err = db.QueryRowContext(ctx, `SELECT sqllock_next_token()`).Scan(&tok)
	if err == nil || !strings.Contains(err.Error(), "reached maximum value") {
		t.Fatalf("token past the sequence's end = %d, %v; want the sequence's refusal", tok, err)
	}
}

// With sqllock.require_sync_replica on, a server whose commits do not wait
// for a synchronous standby (this one has none) hands out no token, so no
// lock: TryAcquire fails naming the key and the cause, and leaves no row.
// The accepting side, on a primary with a synchronous standby, is
// TestRequireSyncReplica in the failover step.
func TestRequireSyncReplicaRefused(t *testing.T) {
	ctx := context.Background()
	db := testdb.Scratch(t, sqllock.Postgres)
	if err := migrations.Up(ctx, db.DB, sqllock.Postgres); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := db.QueryRowContext(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `ALTER DATABASE "`+name+`" SET sqllock.require_sync_replica = on`); err != nil {
		t.Fatal(err)
	}
	fresh, err := sql.Open(db.Driver, db.DSN) // the setting applies to new sessions
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	l, err := tablelock.New(fresh, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// last_value with is_called: a fresh sequence's first draw leaves
	// last_value and sets is_called.
	const seqState = `SELECT last_value::text || ' ' || is_called::text FROM sqllock_fence_seq`
	var drawn string
	if err := fresh.QueryRowContext(ctx, seqState).Scan(&drawn); err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryAcquire(ctx, "nightly")
	if err == nil {
		lease.Release(ctx)
		t.Fatal("lock taken on a primary without a synchronous standby")
	}
	var pg interface{ SQLState() string }
	if !errors.As(err, &pg) || pg.SQLState() != "55000" || errors.Is(err, sqllock.ErrNotAcquired) ||
		!strings.Contains(err.Error(), `"nightly"`) || !strings.Contains(err.Error(), "synchronous standby") {
		t.Fatalf("TryAcquire = %v; want the refusal (SQLSTATE 55000) naming the key and the cause", err)
	}
	t.Log(err)
	var n int
	if err := fresh.QueryRowContext(ctx, `SELECT count(*) FROM sqllock_locks`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d lock rows after the refusal (%v), want none", n, err)
	}
	// Refused before a token is drawn (since migration 00014).
	var after string
	if err := fresh.QueryRowContext(ctx, seqState).Scan(&after); err != nil || after != drawn {
		t.Fatalf("sequence at %q after the refusal (%v), %q before: the refusal drew a token", after, err, drawn)
	}
}

// Migration 00021 gives advisory's era tokens a sequence of their own
// under a live application: a role granted on the shared sequence before
// it is granted the same on the new one, so its sessions keep drawing.
func TestTokenSequenceGrantedAsShared(t *testing.T) {
	ctx := context.Background()
	db, _ := scratchAt(t, ctx, 20)
	var dbName string
	if err := db.QueryRowContext(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	role := "sqllock_grant_" + strings.ToLower(strings.ReplaceAll(dbName, "-", "_"))
	for _, q := range []string{`CREATE ROLE ` + role, `GRANT USAGE ON SEQUENCE sqllock_fence_seq TO ` + role} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		db.ExecContext(context.Background(), `DROP OWNED BY `+role)
		db.ExecContext(context.Background(), `DROP ROLE `+role)
	})
	if err := migrations.Up(ctx, db.DB, sqllock.Postgres); err != nil {
		t.Fatal(err)
	}
	var usage, update bool
	err := db.QueryRowContext(ctx, `SELECT has_sequence_privilege($1, 'sqllock_token_seq', 'USAGE'),
		has_sequence_privilege($1, 'sqllock_token_seq', 'UPDATE')`, role).Scan(&usage, &update)
	if err != nil || !usage || update {
		t.Fatalf("%s on sqllock_token_seq: USAGE %v, UPDATE %v (%v); want USAGE alone, as on sqllock_fence_seq", role, usage, update, err)
	}
}

// Migration 00021 splits what is left of the shared sequence's range:
// with almost nothing left it refuses, saying why, and leaves the schema
// at 00020 (the migration's transaction rolls back).
func TestTokenSequenceRefusedNearTheEnd(t *testing.T) {
	ctx := context.Background()
	db, p := scratchAt(t, ctx, 20)
	if _, err := db.ExecContext(ctx, `SELECT setval('sqllock_fence_seq', 1099511627775 - 1000)`); err != nil {
		t.Fatal(err)
	}
	_, err := p.UpTo(ctx, 21)
	if err == nil || !strings.Contains(err.Error(), "too close to its end") {
		t.Fatalf("migration 00021 with 1000 values left: %v; want the refusal", err)
	}
	var seq sql.NullString
	var maxv int64
	err = db.QueryRowContext(ctx, `SELECT to_regclass('sqllock_token_seq')::text,
		(SELECT max_value FROM pg_sequences WHERE sequencename = 'sqllock_fence_seq')`).Scan(&seq, &maxv)
	if err != nil || seq.Valid || maxv != 1099511627775 {
		t.Fatalf("after the refusal: sqllock_token_seq %v, sqllock_fence_seq MAXVALUE %d (%v); want no new sequence, MAXVALUE unchanged", seq, maxv, err)
	}
}

// A transaction that drew a token holds the shared sequence's lock until
// it ends (a rowlock holder's does), and every later draw would queue
// behind migration 00021's: the migration waits 2 s at most, refuses
// saying why, and runs once the transaction has ended.
func TestTokenSequenceWaitBounded(t *testing.T) {
	ctx := context.Background()
	db, p := scratchAt(t, ctx, 20)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var tok int64
	if err := tx.QueryRowContext(ctx, `SELECT sqllock_next_token()`).Scan(&tok); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = p.UpTo(bounded, 21)
	cancel()
	waited := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "waited 2s for sqllock_fence_seq") || waited > 10*time.Second {
		t.Fatalf("migration 00021 beside an open transaction that drew a token: %v after %v; want the refusal after about 2s", err, waited)
	}
	// Nothing is left queued behind the migration: a draw goes through.
	if err := db.QueryRowContext(ctx, `SELECT sqllock_next_token()`).Scan(&tok); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 21); err != nil {
		t.Fatalf("migration 00021 once the transaction ended: %v", err)
	}
}

// scratchAt is a PostgreSQL database of the test's own, migrated up to
// version, and the provider that migrates it on.
func scratchAt(t *testing.T, ctx context.Context, version int64) (*testdb.DB, *goose.Provider) {
	t.Helper()
	db := testdb.Scratch(t, sqllock.Postgres)
	p, err := migrations.NewProvider(db.DB, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	return db, p
}
