package e2e_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/optimistic"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// galeraNode opens the first node of the Galera cluster that
// SQLLOCK_GALERA_DSNS names (.ci/galera env), migrated, as a handle of its
// own. Without the
// variable the test skips: .ci/step-galera runs it.
func galeraNode(t *testing.T) *testdb.DB {
	t.Helper()
	dsns := strings.Fields(os.Getenv("SQLLOCK_GALERA_DSNS"))
	if len(dsns) == 0 {
		t.Skip("NOT RUN: SQLLOCK_GALERA_DSNS is unset; .ci/step-galera starts a 3-node Galera cluster and runs this")
	}
	db, err := sql.Open("mysql", dsns[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// MariaDB, not MySQL: the migrations pick what the node runs.
	if err := migrations.Up(ctx, db, sqllock.MariaDB); err != nil {
		t.Fatal(err)
	}
	return &testdb.DB{DB: db, Dialect: sqllock.MySQL, Driver: "mysql", DSN: dsns[0]}
}

// A multi-writer cluster without the single-writer option: every strategy
// refuses, saying why and what to do, and writes nothing; a Locker made
// with the option beside one made without it on the same handle does not
// lend it its declaration.
func TestGaleraRefusesMultiWriter(t *testing.T) {
	db := galeraNode(t)
	ctx := context.Background()
	srv, err := sqllock.DetectServer(ctx, db.DB)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s, galera %v, cluster size %d", srv.Version, srv.Galera, srv.ClusterSize)
	if !srv.MultiWriter() {
		t.Fatalf("DetectServer = %+v; want a multi-writer Galera node", srv)
	}
	if d, err := sqllock.ServerDialect(ctx, db.DB, sqllock.MariaDB); err != nil || d != sqllock.MySQL {
		t.Fatalf("ServerDialect on Galera = %v, %v; want MySQL", d, err)
	}
	d := sqllock.MySQL
	key := locktest.Key(t)
	// Declared on this handle by one Locker: the others are not.
	declared, err := tablelock.New(db.DB, d, tablelock.WithSingleWriter(true))
	if err != nil {
		t.Fatal(err)
	}
	defer declared.Close()
	lease, err := declared.TryAcquire(ctx, key+"/declared")
	if err != nil {
		t.Fatalf("a Locker made WithSingleWriter(true): %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	tl, _ := tablelock.New(db.DB, d)
	defer tl.Close()
	rl, _ := rowlock.New(db.DB, d)
	defer rl.Close()
	al, _ := advisory.New(db.DB, d)
	defer al.Close()
	ol, _ := optimistic.New(db.DB, d)
	defer ol.Close()
	for name, l := range map[string]sqllock.Locker{"tablelock": tl, "rowlock": rl, "advisory": al, "optimistic": ol} {
		lease, err := l.TryAcquire(ctx, key)
		if lease != nil {
			_ = lease.Release(ctx)
		}
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if !errors.Is(err, sqllock.ErrUnsupported) || !strings.Contains(msg, "Galera") ||
			!strings.Contains(msg, "WithSingleWriter") || !strings.Contains(msg, name) || !strings.Contains(msg, key) {
			t.Errorf("%s on a multi-writer cluster = %v; want ErrUnsupported naming the strategy, the key, Galera and WithSingleWriter", name, err)
		}
	}
	for _, table := range []string{"sqllock_locks", "sqllock_rows", "sqllock_versions"} {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE lock_key = ?", key).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s has %d rows for the refused key (%v); want none", table, n, err)
		}
	}
	// The MariaDB path needs sequences, which Galera lacks.
	ml, _ := tablelock.New(db.DB, sqllock.MariaDB, tablelock.WithSingleWriter(true))
	defer ml.Close()
	if _, err := ml.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrUnsupported) || !strings.Contains(err.Error(), "use sqllock.MySQL ") {
		t.Errorf("the MariaDB dialect on Galera = %v; want ErrUnsupported pointing to sqllock.MySQL", err)
	}
}

// Declared single-writer (all lock traffic to one node, WithSingleWriter):
// the conformance suite holds, and tokens from every strategy grow in one
// order.
func TestGaleraSingleWriter(t *testing.T) {
	db := galeraNode(t)
	d := sqllock.MySQL
	t.Run("tablelock", func(t *testing.T) {
		locktest.Run(t, locktest.Target{
			DB: db,
			New: func(t testing.TB) sqllock.Locker {
				l, err := tablelock.New(db.DB, d, tablelock.WithSingleWriter(true), tablelock.WithTTL(900*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			},
			Steal: func(t testing.TB, l sqllock.Lease) {
				if _, err := db.Exec("DELETE FROM sqllock_locks WHERE lock_key = ?", l.Key()); err != nil {
					t.Fatal(err)
				}
			},
			LossWithin: 2 * time.Second, Reentrant: true, Exclusive: true,
		})
	})
	t.Run("advisory", func(t *testing.T) {
		locktest.Run(t, locktest.Target{DB: db, Exclusive: true, New: func(t testing.TB) sqllock.Locker {
			l, err := advisory.New(db.DB, d, advisory.WithSingleWriter(true))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}})
	})
	t.Run("rowlock", func(t *testing.T) {
		locktest.Run(t, locktest.Target{DB: db, Exclusive: true, New: func(t testing.TB) sqllock.Locker {
			l, err := rowlock.New(db.DB, d, rowlock.WithSingleWriter(true))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}})
	})
	t.Run("TokensAcrossStrategies", func(t *testing.T) {
		ctx := context.Background()
		key := locktest.Key(t)
		var lockers []sqllock.Locker
		for _, mk := range []func() (sqllock.Locker, error){
			func() (sqllock.Locker, error) { return tablelock.New(db.DB, d, tablelock.WithSingleWriter(true)) },
			func() (sqllock.Locker, error) { return advisory.New(db.DB, d, advisory.WithSingleWriter(true)) },
			func() (sqllock.Locker, error) { return rowlock.New(db.DB, d, rowlock.WithSingleWriter(true)) },
			func() (sqllock.Locker, error) { return optimistic.New(db.DB, d, optimistic.WithSingleWriter(true)) },
		} {
			l, err := mk()
			if err != nil {
				t.Fatal(err)
			}
			defer l.(interface{ Close() error }).Close()
			lockers = append(lockers, l)
		}
		last := int64(0)
		for i := range 40 {
			lease, err := lockers[i%len(lockers)].Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if lease.Token() <= last {
				t.Errorf("acquire %d: token %d after %d", i, lease.Token(), last)
			}
			last = lease.Token()
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
