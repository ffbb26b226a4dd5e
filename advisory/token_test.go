package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// connHandle runs statements on one pinned connection and keeps what it
// knows of its tokens, as a session does, and the statements it ran.
type connHandle struct {
	conn *sql.Conn
	hi   tokenHigh
	sent []string
}

func (h *connHandle) queryRow(ctx context.Context, query string, args []any, dest any) error {
	h.sent = append(h.sent, query)
	return h.conn.QueryRowContext(ctx, query, args...).Scan(dest)
}

func (h *connHandle) high() *tokenHigh { return &h.hi }

// serverTimeline is the timeline the server writes WAL on.
func serverTimeline(t *testing.T, ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) int64 {
	t.Helper()
	var tl int64
	err := q.QueryRowContext(ctx, `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint`).Scan(&tl)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// A PostgreSQL session reads the token era once, then draws the sequence
// value alone, in a transaction that does not wait for its flush: the
// tokens carry the era (the server's timeline in its high bits) over the
// sequence and keep growing, the session's synchronous_commit is as it
// was, and sqllock.require_sync_replica, turned on under the live
// session, still refuses before the sequence moves.
func TestTokenEraOncePerSession(t *testing.T) {
	ctx := context.Background()
	// A pool of its own, closed at the end: the setting below stays on
	// the session.
	db := testdb.Fresh(t, sqllock.Postgres, 1)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	timeline := serverTimeline(t, ctx, conn)
	st := stores[sqllock.Postgres]
	id := st.lockID(DefaultNamespace, t.Name())
	h := &connHandle{conn: conn}
	var last int64
	for i, m := range []mode{exclusive, exclusive, shared, exclusive} {
		draw := st.try
		if i == 3 {
			draw = st.block
		}
		tok, ok, err := draw(ctx, h, id, m)
		if err != nil || !ok {
			t.Fatalf("draw %d: %d, %v, %v", i, tok, ok, err)
		}
		if _, err := st.unlock(ctx, h, id, m); err != nil {
			t.Fatal(err)
		}
		sent := h.sent[len(h.sent)-2]
		if tok>>52 != timeline || tok>>40 != h.hi.bits || h.hi.by != highEra || tok <= last ||
			!strings.Contains(sent, "sqllock_next_token_async()") {
			t.Fatalf("draw %d: token %#x after %#x, session era %#x (%d), by %q; want timeline %d in bits 52 and up, the era in 40 and up, growing, drawn by sqllock_next_token_async()",
				i, tok, last, h.hi.bits, h.hi.by, sent, timeline)
		}
		last = tok
	}
	if n := strings.Count(strings.Join(h.sent, "\n"), pgEra); n != 1 {
		t.Fatalf("the era was read %d times by one session; want once: %q", n, h.sent)
	}
	var sync string
	if err := conn.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&sync); err != nil || sync != "on" {
		t.Fatalf("the session's synchronous_commit after its tokens: %q, %v; want on, as it was", sync, err)
	}

	if _, err := conn.ExecContext(ctx, `SET sqllock.require_sync_replica = on`); err != nil {
		t.Fatal(err)
	}
	const seq = `SELECT last_value FROM sqllock_token_seq`
	var before, after int64
	if err := conn.QueryRowContext(ctx, seq).Scan(&before); err != nil {
		t.Fatal(err)
	}
	tok, ok, err := st.try(ctx, h, id, exclusive)
	var pg interface{ SQLState() string }
	if !errors.As(err, &pg) || pg.SQLState() != "55000" || !strings.Contains(err.Error(), "synchronous standby") {
		t.Fatalf("try with sqllock.require_sync_replica on = %d, %v, %v; want the refusal (SQLSTATE 55000)", tok, ok, err)
	}
	if err := conn.QueryRowContext(ctx, seq).Scan(&after); err != nil || after != before {
		t.Fatalf("sequence at %d after the refusal (%v), %d before", after, err, before)
	}
}

// crash does to db what a crash recovery that lost the last sequence
// values handed out does: the unlogged era table empty, the era tokens'
// unlogged sequence back at its start, the shared sequence back by back
// values. Where the schema has no era table, only the shared sequence
// goes back.
func crash(t *testing.T, ctx context.Context, db *sql.DB, back int64) {
	t.Helper()
	for _, q := range []string{
		`DO $$ BEGIN IF to_regclass('sqllock_token_life') IS NOT NULL THEN TRUNCATE sqllock_token_life; END IF; END $$`,
		`DO $$ BEGIN IF to_regclass('sqllock_token_seq') IS NOT NULL THEN ALTER SEQUENCE sqllock_token_seq RESTART; END IF; END $$`,
		fmt.Sprintf(`SELECT setval('sqllock_fence_seq', greatest(last_value - %d, 1)) FROM sqllock_fence_seq`, back),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// migratedScratch is a PostgreSQL database of the test's own, migrated:
// the tests that set its sequence and eras back disturb no other test.
func migratedScratch(t *testing.T, ctx context.Context) *testdb.DB {
	t.Helper()
	db := testdb.Scratch(t, sqllock.Postgres)
	if err := migrations.Up(ctx, db.DB, sqllock.Postgres); err != nil {
		t.Fatal(err)
	}
	return db
}

// wantRefused: a TryAcquire of key on db is refused with an error that
// names the key and says why (holds why), and no advisory lock is left
// held.
func wantRefused(t *testing.T, ctx context.Context, db *testdb.DB, key, why string) {
	t.Helper()
	l, err := New(db.DB, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, key)
	if err == nil {
		lease.Release(ctx)
		t.Fatalf("token %#x handed out; want the refusal %q", lease.Token(), why)
	}
	if !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), key) {
		t.Fatalf("TryAcquire: %v; want the refusal %q naming the key", err, why)
	}
	var held int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&held); err != nil || held != 0 {
		t.Fatalf("%d advisory locks held after the refusal (%v)", held, err)
	}
}

// A crash that loses sequence values (the tokens' commits did not wait
// for their flush) begins a new era: the first token after it is above
// every token before it, and the era moved by one, on the same timeline.
// Several Lockers begin it at once and agree.
func TestTokenEraAfterCrash(t *testing.T) {
	ctx := context.Background()
	db := migratedScratch(t, ctx)
	timeline := serverTimeline(t, ctx, db.DB)
	var last int64
	for round := range 3 {
		var lockers []*Locker
		for range 4 {
			l, err := New(db.DB, sqllock.Postgres)
			if err != nil {
				t.Fatal(err)
			}
			lockers = append(lockers, l)
		}
		tokens := make([]int64, len(lockers)*5)
		errs := make([]error, len(lockers))
		var wg sync.WaitGroup
		for i, l := range lockers {
			wg.Go(func() {
				for j := range 5 {
					lease, err := l.Acquire(ctx, fmt.Sprintf("%s/%d/%d", t.Name(), round, i))
					if err != nil {
						errs[i] = err
						return
					}
					tokens[i*5+j] = lease.Token()
					if errs[i] = lease.Release(ctx); errs[i] != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, l := range lockers {
			l.Close()
		}
		era := tokens[0] >> 40
		for _, tok := range tokens {
			if tok <= last || tok>>40 != era {
				t.Fatalf("round %d: token %#x after the crash, %#x before it; tokens of the round %#x: want every one above, of one era", round, tok, last, tokens)
			}
		}
		if era>>12 != timeline || (round > 0 && era != last>>40+1) {
			t.Fatalf("round %d: era %#x after %#x, timeline %d: want the next era of the timeline", round, era, last>>40, timeline)
		}
		last = slices.Max(tokens)
		// Every session of the round is closed: the crash ends them.
		crash(t, ctx, db.DB, 1000)
	}
}

// Past 4095 eras on one timeline there is no era left that could not
// repeat: the acquisition is refused with an error that says so and
// names the key, and nothing is held.
func TestTokenEraExhausted(t *testing.T) {
	ctx := context.Background()
	db := migratedScratch(t, ctx)
	timeline := serverTimeline(t, ctx, db.DB)
	if _, err := db.ExecContext(ctx, `UPDATE sqllock_token_era SET era = $1`, timeline<<12|4095); err != nil {
		t.Fatal(err)
	}
	crash(t, ctx, db.DB, 0)
	wantRefused(t, ctx, db, "exhausted", "no new token era")
}

// With the durable era's row gone, a new era could repeat an old one:
// it is refused, saying so, and nothing is held.
func TestTokenEraRowLost(t *testing.T) {
	ctx := context.Background()
	db := migratedScratch(t, ctx)
	if _, err := db.ExecContext(ctx, `DELETE FROM sqllock_token_era`); err != nil {
		t.Fatal(err)
	}
	crash(t, ctx, db.DB, 0)
	wantRefused(t, ctx, db, "row-lost", "lost its row")
}

// A new era is recorded by a commit that waits for its flush, whatever
// the session's synchronous_commit: tokens of it may be drawn without
// waiting only because the era itself is durable.
func TestTokenEraCommitWaits(t *testing.T) {
	ctx := context.Background()
	db := migratedScratch(t, ctx)
	crash(t, ctx, db.DB, 0)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var era int64
	var sync string
	if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, pgEra).Scan(&era); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&sync); err != nil || sync != "on" {
		t.Fatalf("after a new era %#x the transaction's synchronous_commit is %q (%v); want on", era, sync, err)
	}
}

// On a schema before migration 00020, which has no era, a session draws
// the sequence value under its timeline, read from its first token.
func TestTokenTimelineWithoutEra(t *testing.T) {
	ctx := context.Background()
	db := testdb.Scratch(t, sqllock.Postgres)
	p, err := migrations.NewProvider(db.DB, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 19); err != nil {
		t.Fatal(err)
	}
	timeline := serverTimeline(t, ctx, db.DB)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st := stores[sqllock.Postgres]
	id := st.lockID(DefaultNamespace, t.Name())
	h := &connHandle{conn: conn}
	var last int64
	for i := range 3 {
		tok, ok, err := st.try(ctx, h, id, exclusive)
		if err != nil || !ok {
			t.Fatalf("draw %d: %d, %v, %v", i, tok, ok, err)
		}
		if _, err := st.unlock(ctx, h, id, exclusive); err != nil {
			t.Fatal(err)
		}
		sent := h.sent[len(h.sent)-2]
		if tok>>40 != timeline || tok <= last || h.hi.by != highTimeline ||
			strings.Contains(sent, "sqllock_next_token()") != (i == 0) {
			t.Fatalf("draw %d: token %#x after %#x, by %q; want timeline %d in bits 40 and up, growing, sqllock_next_token() the first time only",
				i, tok, last, sent, timeline)
		}
		last = tok
	}
}

// On a schema before migration 00019, which has no counter function, a
// session's later tokens are drawn in full: every acquisition succeeds,
// and the lease taken first is not lost to the missing function.
func TestTokenWithoutCounterFunction(t *testing.T) {
	ctx := context.Background()
	db := testdb.Scratch(t, sqllock.Postgres)
	p, err := migrations.NewProvider(db.DB, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 18); err != nil {
		t.Fatal(err)
	}
	l, err := New(db.DB, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first, err := l.Acquire(ctx, t.Name()+"/first")
	if err != nil {
		t.Fatal(err)
	}
	last := first.Token()
	for i := range 3 {
		lease, err := l.Acquire(ctx, fmt.Sprintf("%s/%d", t.Name(), i))
		if err != nil {
			t.Fatalf("acquire %d on a schema without sqllock_next_token_counter: %v", i, err)
		}
		if lease.Token() <= last {
			t.Fatalf("acquire %d: token %d after %d", i, lease.Token(), last)
		}
		last = lease.Token()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Err(); err != nil {
		t.Fatalf("the first lease was lost: %v", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
