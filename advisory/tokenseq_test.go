package advisory

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// tokenRanges are the ends of the two sequences' ranges: the shared
// sequence's MAXVALUE, and where the era tokens' sequence starts.
func tokenRanges(t *testing.T, ctx context.Context, db *sql.DB) (sharedMax, eraMin int64) {
	t.Helper()
	err := db.QueryRowContext(ctx, `SELECT
		(SELECT max_value FROM pg_sequences WHERE sequencename = 'sqllock_fence_seq'),
		(SELECT min_value FROM pg_sequences WHERE sequencename = 'sqllock_token_seq')`).Scan(&sharedMax, &eraMin)
	if err != nil {
		t.Fatal(err)
	}
	return sharedMax, eraMin
}

// Since migration 00021 an era token is drawn from an unlogged sequence
// of its own (PostgreSQL 15 and later): the statement that draws it takes
// no transaction id, so it writes no WAL and has no commit to flush, and
// the session's synchronous_commit is left as it was. The sequence's
// range starts above every value the shared sequence may still hand out.
func TestTokenSequenceWritesNothing(t *testing.T) {
	ctx := context.Background()
	db := migratedScratch(t, ctx)
	var version int
	var persistence string
	err := db.QueryRowContext(ctx, `SELECT current_setting('server_version_num')::int,
		(SELECT relpersistence::text FROM pg_class WHERE oid = 'sqllock_token_seq'::regclass)`).Scan(&version, &persistence)
	if err != nil {
		t.Fatal(err)
	}
	if version < 150000 {
		if persistence != "p" {
			t.Fatalf("sqllock_token_seq's persistence on server %d: %q; want logged", version, persistence)
		}
		t.Skipf("server %d has no unlogged sequences", version)
	}
	if persistence != "u" {
		t.Fatalf("sqllock_token_seq's persistence: %q; want unlogged", persistence)
	}
	sharedMax, eraMin := tokenRanges(t, ctx, db.DB)
	if sharedMax >= eraMin {
		t.Fatalf("the shared sequence ends at %d, the era tokens' starts at %d: their values could interleave", sharedMax, eraMin)
	}

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	st := stores[sqllock.Postgres]
	id := st.lockID(DefaultNamespace, t.Name())
	var n sql.NullInt64
	if err := tx.QueryRowContext(ctx, pgTryAsync, id.args...).Scan(&n); err != nil || !n.Valid {
		t.Fatalf("%s: %v, %v", pgTryAsync, n, err)
	}
	var xid sql.NullString
	var sync string
	if err := tx.QueryRowContext(ctx, `SELECT pg_current_xact_id_if_assigned()::text, current_setting('synchronous_commit')`).Scan(&xid, &sync); err != nil {
		t.Fatal(err)
	}
	if xid.Valid || sync != "on" {
		t.Fatalf("after drawing %d: transaction id %q, synchronous_commit %q; want none, and on as it was", n.Int64, xid.String, sync)
	}
	if n.Int64 < eraMin || n.Int64 >= 1<<40 {
		t.Fatalf("value %d outside the era tokens' range [%d, 2^40)", n.Int64, eraMin)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A session lock outlives the transaction's rollback.
	if _, err := conn.ExecContext(ctx, pgUnlock, id.args...); err != nil {
		t.Fatal(err)
	}

	// With sqllock.require_sync_replica defined, even off, the draw takes
	// the check's own function, and still draws above the last value.
	if _, err := conn.ExecContext(ctx, `SET sqllock.require_sync_replica = off`); err != nil {
		t.Fatal(err)
	}
	var m sql.NullInt64
	if err := conn.QueryRowContext(ctx, pgTryAsync, id.args...).Scan(&m); err != nil || !m.Valid || m.Int64 <= n.Int64 {
		t.Fatalf("with sqllock.require_sync_replica off: %v, %v; want a value above %d", m, err, n.Int64)
	}
	if _, err := conn.ExecContext(ctx, pgUnlock, id.args...); err != nil {
		t.Fatal(err)
	}
}

// Migration 00021 moves the era tokens to their own sequence under live
// sessions: a session that read its era before keeps it, and its tokens
// keep growing across the migration, its Down and the migration again.
// A statement planned before the migration and still waiting for its
// lock draws from the shared sequence afterwards, and even at the shared
// sequence's very end (tablelock goes on drawing from it) its token is
// below every token drawn after the migration.
func TestTokenSequenceUnderLiveSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := testdb.Scratch(t, sqllock.Postgres)
	p, err := migrations.NewProvider(db.DB, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 20); err != nil {
		t.Fatal(err)
	}
	l, err := New(db.DB, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var last, era int64
	draw := func(step string) int64 {
		t.Helper()
		lease, err := l.Acquire(ctx, t.Name())
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		tok := lease.Token()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if era == 0 {
			era = tok >> 40
		}
		if tok <= last || tok>>40 != era {
			t.Fatalf("%s: token %#x after %#x; want it above, of era %#x", step, tok, last, era)
		}
		last = tok
		return tok
	}
	draw("before the migration")
	draw("before the migration")

	// The straggler: planned with migration 00020's body, waiting.
	st := stores[sqllock.Postgres]
	id := st.lockID(DefaultNamespace, t.Name()+"/straggler")
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, id.args...); err != nil {
		t.Fatal(err)
	}
	waiter, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	type drawn struct {
		n   int64
		err error
	}
	straggler := make(chan drawn, 1)
	go func() {
		var d drawn
		d.err = waiter.QueryRowContext(ctx, pgBlockAsync, id.args...).Scan(&d.n)
		straggler <- d
	}()
	for {
		var waiting int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	if _, err := p.UpTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	sharedMax, eraMin := tokenRanges(t, ctx, db.DB)
	if tok := draw("after the migration"); tok&(1<<40-1) < eraMin {
		t.Fatalf("token %#x after the migration not drawn from sqllock_token_seq (from %d)", tok, eraMin)
	}
	// tablelock draws the shared sequence to its last value.
	if _, err := db.ExecContext(ctx, `SELECT setval('sqllock_fence_seq', $1::bigint - 1)`, sharedMax); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, id.args...); err != nil {
		t.Fatal(err)
	}
	d := <-straggler
	if d.err != nil {
		t.Fatal(d.err)
	}
	if d.n != sharedMax {
		t.Fatalf("the straggler drew %d; want %d, the shared sequence's last value", d.n, sharedMax)
	}
	if tok := era<<40 | d.n; tok >= last {
		t.Fatalf("the straggler's token %#x, drawn after %#x, is not below it", tok, last)
	}
	if _, err := waiter.ExecContext(ctx, pgUnlock, id.args...); err != nil {
		t.Fatal(err)
	}
	draw("after the straggler")

	if _, err := p.DownTo(ctx, 20); err != nil {
		t.Fatal(err)
	}
	draw("after the migration's Down")
	if _, err := p.UpTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	draw("after the migration again")
}
