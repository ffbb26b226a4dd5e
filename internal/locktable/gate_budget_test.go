package locktable

import (
	"database/sql"
	"log/slog"
	"testing"

	_ "github.com/go-sql-driver/mysql" // driver "mysql"; nothing here connects

	"github.com/sqllock/sqllock"
)

// TestGateBudget: the gate sessions of a capped pool are counted for the
// pool, whatever the number of Gates on it: half the connections above
// two, with one left for keeping gates while none keeps them.
func TestGateBudget(t *testing.T) {
	for _, c := range []struct {
		cap   int
		takes []bool // false: keep, true: wait
		want  []bool
	}{
		{cap: 0, takes: []bool{false, false, true, true, true}, want: []bool{true, true, true, true, true}},
		{cap: 3, takes: []bool{false, true}, want: []bool{false, false}},
		{cap: 4, takes: []bool{true, false, false, true}, want: []bool{false, true, false, false}},
		{cap: 6, takes: []bool{true, true, false, false}, want: []bool{true, false, true, false}},
		{cap: 6, takes: []bool{false, true, true}, want: []bool{true, true, false}},
		{cap: 10, takes: []bool{false, false, true, true, true}, want: []bool{true, true, true, true, false}},
	} {
		db, err := sql.Open("mysql", "u@tcp(127.0.0.1:1)/x")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(c.cap)
		b := budgetFor(db)
		for i, wait := range c.takes {
			if got := b.take(wait); got != c.want[i] {
				t.Errorf("cap %d: take %d (wait %v) = %v, want %v", c.cap, i, wait, got, c.want[i])
			}
		}
		b.drop()
		db.Close()
	}
}

// TestGateBudgetShared: the Gates of every Table on one pool draw on one
// budget, which is forgotten when the last of them closes.
func TestGateBudgetShared(t *testing.T) {
	db, err := sql.Open("mysql", "u@tcp(127.0.0.1:1)/x")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(4)
	var gates []*Gate
	for range 3 {
		tbl, err := Open(db, sqllock.MariaDB, Config{Table: "sqllock_locks"})
		if err != nil {
			t.Fatal(err)
		}
		defer tbl.Close()
		gates = append(gates, tbl.Gate(slog.Default()))
	}
	if gates[0].b != gates[1].b || gates[1].b != gates[2].b {
		t.Fatal("Gates on one pool have budgets of their own")
	}
	if !gates[0].b.take(false) {
		t.Fatal("a pool of 4 lends no session to keep gates")
	}
	if gates[1].b.take(false) || gates[2].b.take(true) {
		t.Fatal("a pool of 4 lent a second gate session to another Gate")
	}
	gates[0].b.put(false)
	for i, g := range gates {
		g.Close()
		g.Close() // idempotent: counts once
		budgetsMu.Lock()
		_, kept := budgets[db]
		budgetsMu.Unlock()
		if last := i == len(gates)-1; kept == last {
			t.Fatalf("after %d of %d Gates closed, budget kept = %v", i+1, len(gates), kept)
		}
	}
}
