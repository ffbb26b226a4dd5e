package locktable_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyNoLeaks(m) }

// table opens a lock table private to the test, closed and dropped when it
// ends.
func table(t *testing.T, db *testdb.DB, cfg locktable.Config) *locktable.Table {
	t.Helper()
	cfg.Table = newTable(t, db)
	return opener(t, db, cfg)()
}

// newTable creates a lock table private to the test, dropped when it ends,
// and returns its name.
func newTable(t *testing.T, db *testdb.DB) string {
	t.Helper()
	name := fmt.Sprintf("rl_test_%x", rand.Uint64())
	if err := locktable.CreateTable(context.Background(), db.DB, db.Dialect, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + name) })
	return name
}

// opener returns a function that opens a Table of cfg, closed when the test
// ends: several Tables on one lock table stand for several processes.
func opener(t *testing.T, db *testdb.DB, cfg locktable.Config) func() *locktable.Table {
	return func() *locktable.Table {
		t.Helper()
		tbl, err := locktable.Open(db.DB, db.Dialect, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tbl.Close() })
		return tbl
	}
}

func TestOpenRefusesBadInput(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	for name, d := range map[string]sqllock.Dialect{"zero": 0, "unknown": 42} {
		if _, err := locktable.Open(db.DB, d, locktable.Config{Table: "t"}); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("%s dialect: Open = %v, want ErrInvalidOption", name, err)
		}
	}
	for _, name := range []string{"", "a b", "t; DROP TABLE t", "a.b.c"} {
		if _, err := locktable.Open(db.DB, sqllock.SQLite, locktable.Config{Table: name}); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("table %q: Open = %v, want ErrInvalidOption", name, err)
		}
	}
}

// A take wins a free key with a fresh token, one hold more for its owner,
// and nothing for another owner, who learns the holder and how long it
// stays. A release with keep leaves the row free of holders but taken
// until acquired_at + keep; ForceRelease by its token frees it at once. An
// expired row goes to the next claimant with a larger token. Each claim
// runs both ways: expecting the key free (MariaDB and PostgreSQL then try
// a plain update first on a quiet key) or not.
func TestTakeReleaseKeep(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		for _, free := range []bool{false, true} {
			t.Run(fmt.Sprintf("ExpectFree=%v", free), func(t *testing.T) { takeReleaseKeep(t, db, free) })
		}
	})
}

func takeReleaseKeep(t *testing.T, db *testdb.DB, free bool) {
	ctx := context.Background()
	tbl := table(t, db, locktable.Config{})
	mine := locktable.Claim{Key: "k", Owner: "owner-a", Host: "host-a", TTL: time.Minute, ExpectFree: free}
	a, err := tbl.Take(ctx, mine)
	if err != nil || !a.Won || a.Token <= 0 || a.Holds != 1 {
		t.Fatalf("first take = %+v, %v; want won, one hold, a token", a, err)
	}
	again, err := tbl.Take(ctx, mine)
	if err != nil || !again.Won || again.Token != a.Token || again.Holds != 2 {
		t.Fatalf("take by the holder = %+v, %v; want won, two holds, token %d", again, err, a.Token)
	}
	theirs := locktable.Claim{Key: "k", Owner: "owner-b", Host: "host-b", TTL: time.Minute, ExpectFree: free}
	r, err := tbl.Take(ctx, theirs)
	if err != nil || r.Won || r.Host != "host-a" || r.Remaining < 50*time.Second {
		t.Fatalf("take by another owner = %+v, %v; want refused by host-a for about a minute", r, err)
	}

	for range 2 {
		if err := tbl.Release(ctx, "k", "owner-a", a.Token, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := tbl.Release(ctx, "k", "owner-a", a.Token, 0); !errors.Is(err, sqllock.ErrLockLost) {
		t.Errorf("a third release of two holds = %v, want ErrLockLost", err)
	}
	infos, err := tbl.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Holds != 0 || infos[0].Owner != "" || infos[0].Token != a.Token {
		t.Fatalf("List after the last release with keep = %+v; want the row kept, no holder", infos)
	}
	if kept := infos[0].ExpiresAt.Sub(infos[0].AcquiredAt); kept < 59*time.Minute || kept > 61*time.Minute {
		t.Errorf("row kept %v after its acquisition, want an hour", kept)
	}
	if r, err := tbl.Take(ctx, theirs); err != nil || r.Won {
		t.Fatalf("take inside the keep = %+v, %v; want refused", r, err)
	}

	if ok, err := tbl.ForceRelease(ctx, "k", a.Token+1); ok || !errors.Is(err, sqllock.ErrNotHeld) {
		t.Errorf("ForceRelease naming another token = %v, %v; want ErrNotHeld", ok, err)
	}
	if ok, err := tbl.ForceRelease(ctx, "k", a.Token); !ok || err != nil {
		t.Fatalf("ForceRelease = %v, %v; want freed", ok, err)
	}
	next, err := tbl.Take(ctx, theirs)
	if err != nil || !next.Won || next.Token <= a.Token {
		t.Fatalf("take after ForceRelease = %+v, %v; want won with a token above %d", next, err, a.Token)
	}
	if ok, err := tbl.ReleaseOwner(ctx, "k", "owner-a"); ok || err != nil {
		t.Errorf("ReleaseOwner by a former holder = %v, %v; want nothing released", ok, err)
	}
	if ok, err := tbl.ReleaseOwner(ctx, "k", "owner-b"); !ok || err != nil {
		t.Errorf("ReleaseOwner by the holder = %v, %v; want released", ok, err)
	}

	// Key q is never refused: a claim expecting it free runs the plain
	// update where the store has one (MariaDB, PostgreSQL).
	quiet := locktable.Claim{Key: "q", Owner: "owner-a", Host: "host-a", TTL: time.Minute, ExpectFree: free}
	q1, err := tbl.Take(ctx, quiet)
	if err != nil || !q1.Won {
		t.Fatalf("take of q = %+v, %v", q1, err)
	}
	if err := tbl.Release(ctx, "q", "owner-a", q1.Token, 0); err != nil {
		t.Fatal(err)
	}
	brief := locktable.Claim{Key: "q", Owner: "owner-c", Host: "host-c", TTL: 50 * time.Millisecond, ExpectFree: free}
	gone, err := tbl.Take(ctx, brief)
	if err != nil || !gone.Won || gone.Holds != 1 || gone.Token <= q1.Token {
		t.Fatalf("take of the freed key = %+v, %v; want won, one hold, a token above %d", gone, err, q1.Token)
	}
	time.Sleep(100 * time.Millisecond)
	after, err := tbl.Take(ctx, quiet)
	if err != nil || !after.Won || after.Holds != 1 || after.Token <= gone.Token {
		t.Fatalf("take of the expired key = %+v, %v; want won, one hold, a token above %d", after, err, gone.Token)
	}
	if again, err := tbl.Take(ctx, quiet); err != nil || !again.Won || again.Holds != 2 || again.Token != after.Token {
		t.Fatalf("take of q by its holder = %+v, %v; want won, two holds, token %d", again, err, after.Token)
	}
	if err := tbl.Release(ctx, "q", "owner-c", gone.Token, 0); !errors.Is(err, sqllock.ErrLockLost) {
		t.Errorf("release by the expired holder = %v, want ErrLockLost", err)
	}
}

// A detached take whose caller gives up gives back what it won, and Close
// waits for that: the key is free once Close returns.
func TestTakeDetachedGivesBack(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		tbl := table(t, db, locktable.Config{})
		for i := range 50 {
			c := locktable.Claim{Key: "k", Owner: fmt.Sprintf("owner-%d", i), Host: "h", TTL: time.Minute, Fresh: true}
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(1500))*time.Microsecond)
			a, err := tbl.TakeDetached(ctx, c)
			cancel()
			if err == nil && a.Won {
				if err := tbl.Release(context.Background(), "k", c.Owner, a.Token, 0); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
			}
		}
		if err := tbl.Close(); err != nil {
			t.Fatal(err)
		}
		if infos, err := tbl.List(context.Background()); err != nil || len(infos) != 0 {
			t.Fatalf("after Close: %+v, %v; want nothing held", infos, err)
		}
	})
}

// TestLive: Live names the keys among those asked that are held now, and
// neither a freed one nor one never taken.
func TestLive(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		tbl := table(t, db, locktable.Config{})
		var tokens []int64
		for _, k := range []string{"a", "b", "A"} {
			a, err := tbl.Take(ctx, locktable.Claim{Key: k, Owner: "o-" + k, Host: "h", TTL: time.Minute})
			if err != nil || !a.Won {
				t.Fatalf("take %q: %+v, %v", k, a, err)
			}
			tokens = append(tokens, a.Token)
		}
		if err := tbl.Release(ctx, "a", "o-a", tokens[0], 0); err != nil {
			t.Fatal(err)
		}
		live, err := tbl.Live(ctx, []string{"a", "b", "c", "a "})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(live) != "[b]" {
			t.Fatalf("Live = %v, want [b]", live)
		}
	})
}

// On PostgreSQL a take of a free row by the plain update (a claim that
// expects the key free, on a row its Table has seen) clears the row's mark
// and takes the claimant out of the queue of waiters, as the upsert does:
// left there, a later release would call a Table that no longer waits, or
// announce the key to every listener.
func TestFreeTakeLeavesQueue(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx := context.Background()
	cfg := locktable.Config{Notify: true, Table: newTable(t, db)}
	open := opener(t, db, cfg)
	holder, first, second, poller := open(), open(), open(), open()
	claim := func(owner string, listening, free bool) locktable.Claim {
		return locktable.Claim{Key: "k", Owner: owner, Host: "h", TTL: time.Minute, Listening: listening, ExpectFree: free}
	}
	a, err := holder.Take(ctx, claim("holder", false, false))
	if err != nil || !a.Won {
		t.Fatalf("first take = %+v, %v", a, err)
	}
	for _, w := range []struct {
		tbl       *locktable.Table
		owner     string
		listening bool
	}{{first, "first", true}, {second, "second", true}, {poller, "poller", false}} {
		if r, err := w.tbl.Take(ctx, claim(w.owner, w.listening, false)); err != nil || r.Won {
			t.Fatalf("take by %s of a held key = %+v, %v; want refused", w.owner, r, err)
		}
	}
	state := func() (wanted bool, queued int) {
		t.Helper()
		err := db.QueryRow("SELECT wanted, cardinality(waiters) FROM "+cfg.Table+" WHERE lock_key = 'k'").Scan(&wanted, &queued)
		if err != nil {
			t.Fatal(err)
		}
		return wanted, queued
	}
	if wanted, queued := state(); !wanted || queued != 2 {
		t.Fatalf("after the refusals: wanted %v, %d queued; want marked, two queued", wanted, queued)
	}
	if err := holder.Release(ctx, "k", "holder", a.Token, 0); err != nil {
		t.Fatal(err)
	}
	if wanted, queued := state(); !wanted || queued != 1 {
		t.Fatalf("after the release: wanted %v, %d queued; want marked, the second still queued", wanted, queued)
	}
	// The second Table was refused a moment ago: only after a quiet second
	// does it try the plain update.
	time.Sleep(1100 * time.Millisecond)
	won, err := second.Take(ctx, claim("second", true, true))
	if err != nil || !won.Won || won.Token <= a.Token {
		t.Fatalf("take of the freed key by the second waiter = %+v, %v; want won with a token above %d", won, err, a.Token)
	}
	if wanted, queued := state(); wanted || queued != 0 {
		t.Errorf("after the second waiter took the key: wanted %v, %d queued; want neither", wanted, queued)
	}
}

// TestFreedRowForTakeInFlight: a take whose statement began while the key
// was held, and reached the row only after the key was freed, takes it. A
// statement reads the clock once, at its start, so the freed row must
// read as free at any moment after its last hold began: a row freed "now"
// looked held to such a take, which then slept. A trigger that holds the
// late take back before it reaches the row stands for a take that waited
// on the release's row lock. Each way of freeing a key is tried.
func TestFreedRowForTakeInFlight(t *testing.T) {
	frees := map[string]func(ctx context.Context, tbl *locktable.Table, a locktable.Attempt) error{
		"Release": func(ctx context.Context, tbl *locktable.Table, a locktable.Attempt) error {
			return tbl.Release(ctx, "k", "holder", a.Token, 0)
		},
		"ReleaseOwner": func(ctx context.Context, tbl *locktable.Table, _ locktable.Attempt) error {
			_, err := tbl.ReleaseOwner(ctx, "k", "holder")
			return err
		},
		"ForceRelease": func(ctx context.Context, tbl *locktable.Table, a locktable.Attempt) error {
			_, err := tbl.ForceRelease(ctx, "k", a.Token)
			return err
		},
	}
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		switch db.Dialect {
		case sqllock.SQLite:
			t.Skip("one writer at a time: a take cannot be in flight while a release commits")
		case sqllock.MySQL:
			// Its releases are the MariaDB store's, tested on that run.
			t.Skip("the MySQL path's take reads its token back with LAST_INSERT_ID, which the trigger this test needs resets on MariaDB")
		}
		cfgs := map[string]locktable.Config{"plain": {}}
		if db.Dialect == sqllock.Postgres {
			cfgs["notify"] = locktable.Config{Notify: true}
			cfgs["fair"] = locktable.Config{Notify: true, Fair: true}
		}
		for cname, cfg := range cfgs {
			for fname, free := range frees {
				t.Run(cname+"/"+fname, func(t *testing.T) {
					cfg.Table = newTable(t, db)
					slowInsertsOf(t, db, cfg.Table, "late", 400*time.Millisecond)
					tbl := opener(t, db, cfg)()
					ctx := context.Background()
					a, err := tbl.Take(ctx, locktable.Claim{Key: "k", Owner: "holder", Host: "h", TTL: time.Minute})
					if err != nil || !a.Won {
						t.Fatalf("first take = %+v, %v", a, err)
					}
					type result struct {
						a   locktable.Attempt
						err error
					}
					late := make(chan result, 1)
					go func() {
						r, err := tbl.Take(ctx, locktable.Claim{Key: "k", Owner: "late", Host: "h-late", TTL: time.Minute})
						late <- result{r, err}
					}()
					time.Sleep(100 * time.Millisecond) // the late take is held back
					freeErr := free(ctx, tbl, a)
					r := <-late
					if freeErr != nil || r.err != nil {
						t.Fatalf("free: %v; late take: %v", freeErr, r.err)
					}
					if !r.a.Won || r.a.Token <= a.Token {
						t.Fatalf("take begun before the key was freed = %+v; want won with a token above %d", r.a, a.Token)
					}
				})
			}
		}
	})
}

// slowInsertsOf makes each insert into table of a row for owner sleep d
// first, before it looks for a conflicting row (a BEFORE INSERT trigger).
func slowInsertsOf(t *testing.T, db *testdb.DB, table, owner string, d time.Duration) {
	t.Helper()
	secs := fmt.Sprintf("%.3f", d.Seconds())
	stmts := []string{`CREATE TRIGGER ` + table + `_slow BEFORE INSERT ON ` + table + ` FOR EACH ROW
IF NEW.owner = '` + owner + `' THEN DO SLEEP(` + secs + `); END IF`}
	if db.Dialect == sqllock.Postgres {
		stmts = []string{`CREATE FUNCTION ` + table + `_slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.owner = '` + owner + `' THEN PERFORM pg_sleep(` + secs + `); END IF; RETURN NEW; END $$`,
			`CREATE TRIGGER ` + table + `_slow BEFORE INSERT ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION ` + table + `_slow()`}
		t.Cleanup(func() { db.Exec("DROP FUNCTION IF EXISTS " + table + "_slow() CASCADE") })
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWaitedReleaseNotQuiet: on PostgreSQL a release of a key this Table
// takes for quiet first tries the statement that assumes nobody waits; when
// it finds a waiter, the announced release frees the key and calls the
// waiter, and the key is no longer quiet: the next releases, while
// waiters come and go, do not pay that first round trip again.
func TestWaitedReleaseNotQuiet(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx := context.Background()
	open := opener(t, db, locktable.Config{Notify: true, Table: newTable(t, db)})
	holder, waiter := open(), open()
	claim := func(owner string) locktable.Claim {
		return locktable.Claim{Key: "k", Owner: owner, Host: "h", TTL: time.Minute, Listening: true}
	}
	a, err := holder.Take(ctx, claim("holder"))
	if err != nil || !a.Won {
		t.Fatalf("first take = %+v, %v", a, err)
	}
	if !holder.Quiet("k") {
		t.Fatal("a key taken without a refusal is not quiet")
	}
	if r, err := waiter.Take(ctx, claim("waiter")); err != nil || r.Won {
		t.Fatalf("take of a held key = %+v, %v; want refused", r, err)
	}
	if err := holder.Release(ctx, "k", "holder", a.Token, 0); err != nil {
		t.Fatal(err)
	}
	if holder.Quiet("k") {
		t.Error("the key is still quiet after its release found a waiter")
	}
	if r, err := waiter.Take(ctx, claim("waiter")); err != nil || !r.Won || r.Token <= a.Token {
		t.Fatalf("the waiter's take after the release = %+v, %v; want won with a token above %d", r, err, a.Token)
	}
}
