package migrations_test

import (
	"context"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// TestTypedWaiters: migration 00016 turns the text queue entries of
// 00013 into sqllock_waiter values, field by field, in the default table
// and in a table of the same shape made for WithTable, and its Down
// writes the very strings back.
func TestTypedWaiters(t *testing.T) {
	db := testdb.Scratch(t, sqllock.Postgres)
	ctx := context.Background()
	p, err := migrations.NewProvider(db.DB, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	const (
		bare  = "00000000deadbeef"
		entry = "00000000deadbeef00000000025000005008ownerhost1234"
		wide  = "0123456789abcdef00000000150000003002öwnhé" // owner and host lengths count characters
	)
	for _, table := range []string{"sqllock_locks", "my_locks"} {
		if table != "sqllock_locks" {
			if _, err := db.Exec("CREATE TABLE my_locks (LIKE sqllock_locks INCLUDING ALL)"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := db.Exec("INSERT INTO "+table+" VALUES ('k', 'o', 'h', 1, 5, now(), now(), false, $1::text[], $2), ('free', '', 'h', 0, 6, now(), now(), false, '{}', '')",
			"{"+bare+","+entry+"}", wide)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.UpTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"sqllock_locks", "my_locks"} {
		var got [4]string
		err := db.QueryRow(`SELECT waiters[1]::text, waiters[2]::text, called::text,
			(SELECT count(*) FROM `+table+` WHERE lock_key = 'free' AND called IS NULL AND waiters = '{}')::text
			FROM `+table+` WHERE lock_key = 'k'`).Scan(&got[0], &got[1], &got[2], &got[3])
		if err != nil {
			t.Fatal(err)
		}
		want := [4]string{"(00000000deadbeef,0,\"\",\"\")", "(00000000deadbeef,250000,owner,host1234)", "(0123456789abcdef,1500000,öwn,hé)", "1"}
		if got != want {
			t.Errorf("%s after 00016: %q; want %q", table, got, want)
		}
	}
	if _, err := p.DownTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"sqllock_locks", "my_locks"} {
		var waiters, called, free string
		err := db.QueryRow(`SELECT array_to_string(waiters, ' '), called,
			(SELECT called || cardinality(waiters) FROM `+table+` WHERE lock_key = 'free')
			FROM `+table+` WHERE lock_key = 'k'`).Scan(&waiters, &called, &free)
		if err != nil {
			t.Fatal(err)
		}
		if waiters != bare+" "+entry || called != wide || free != "0" {
			t.Errorf("%s after 00016's Down: waiters %q, called %q, free row %q; want them as before", table, waiters, called, free)
		}
	}
}
