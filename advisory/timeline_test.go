package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// connHandle runs statements on one pinned connection and keeps its
// timeline, as a session does, and the statements it ran.
type connHandle struct {
	conn *sql.Conn
	tl   int64
	sent []string
}

func (h *connHandle) queryRow(ctx context.Context, query string, args []any, dest any) error {
	h.sent = append(h.sent, query)
	return h.conn.QueryRowContext(ctx, query, args...).Scan(dest)
}

func (h *connHandle) timeline() *int64 { return &h.tl }

// A PostgreSQL session reads its timeline from its first token and then
// draws the sequence value alone: the tokens carry the server's timeline
// over the sequence, as sqllock_next_token's do, and keep growing; and
// sqllock.require_sync_replica, turned on under the live session, still
// refuses before the sequence moves.
func TestTokenTimelineOncePerSession(t *testing.T) {
	ctx := context.Background()
	// A pool of its own, closed at the end: the setting below stays on
	// the session.
	db := testdb.Fresh(t, sqllock.Postgres, 1)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var timeline int64
	err = conn.QueryRowContext(ctx, `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint`).Scan(&timeline)
	if err != nil {
		t.Fatal(err)
	}
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
		if tok>>40 != timeline || tok <= last || h.tl != timeline ||
			strings.Contains(sent, "sqllock_next_token()") != (i == 0) {
			t.Fatalf("draw %d: token %#x after %#x, session timeline %d, by %q; want timeline %d in bits 40 and up, growing, sqllock_next_token() the first time only",
				i, tok, last, h.tl, sent, timeline)
		}
		last = tok
	}

	if _, err := conn.ExecContext(ctx, `SET sqllock.require_sync_replica = on`); err != nil {
		t.Fatal(err)
	}
	const seq = `SELECT last_value FROM sqllock_fence_seq`
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
