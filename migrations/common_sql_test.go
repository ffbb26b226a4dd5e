package migrations_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/sqlscan"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/tablelock"
)

// On MySQL the migrations run without the sequence; on MariaDB unchanged.
func TestMigrationsForMySQL(t *testing.T) {
	sub, err := fs.Sub(migrations.FS, "mysql")
	if err != nil {
		t.Fatal(err)
	}
	mysql, err := migrations.ForServer(sub, sqllock.Server{Version: "8.4.3", Comment: "MySQL Community Server - GPL"})
	if err != nil {
		t.Fatal(err)
	}
	mariadb, err := migrations.ForServer(sub, sqllock.Server{Version: "10.11.6-MariaDB", MariaDB: true})
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(sub, "*.sql")
	if err != nil || len(names) < 8 {
		t.Fatalf("migrations: %v, %v", names, err)
	}
	for _, name := range names {
		orig, _ := fs.ReadFile(sub, name)
		got, err := fs.ReadFile(mysql, name)
		if err != nil {
			t.Fatal(err)
		}
		// The executable comment /*M! ... */ is MariaDB's: MySQL skips it.
		for _, line := range strings.Split(string(got), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				continue
			}
			code, _, _ := strings.Cut(line, "/*M!")
			if bad := sqlscan.MariaDBOnly(code); len(bad) > 0 {
				t.Errorf("%s runs %v on MySQL: %s", name, bad, line)
			}
		}
		same, _ := fs.ReadFile(mariadb, name)
		if string(same) != string(orig) {
			t.Errorf("%s differs on MariaDB", name)
		}
		if name == "00001_sqllock.sql" && string(got) == string(orig) {
			t.Errorf("%s keeps its sequence on MySQL", name)
		}
	}
}

// A MariaDB database moved from the MySQL path to the MySQL path's
// tickets (00010) keeps its tokens growing: 00010 starts the tickets above
// the sequence.
func TestTicketsStartAboveSequence(t *testing.T) {
	if testdb.CommonMode() {
		t.Skip("needs the MariaDB path, which common mode leaves out")
	}
	db := testdb.Scratch(t, sqllock.MariaDB)
	ctx := context.Background()
	p, err := migrations.NewProvider(db.DB, sqllock.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 7); err != nil {
		t.Fatal(err)
	}
	key := locktest.Key(t)
	old, err := tablelock.New(db.DB, sqllock.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	var last int64
	for range 5 {
		lease, err := old.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		last = lease.Token()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	common, err := tablelock.New(db.DB, sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	defer common.Close()
	lease, err := common.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if lease.Token() <= last {
		t.Errorf("first token of the MySQL path %d, not above the sequence's last %d", lease.Token(), last)
	}
}
