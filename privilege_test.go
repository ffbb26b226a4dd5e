package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// envBare names, per dialect, a DSN of a role that may connect to the
// migrated database but holds none of the application role's grants.
// .ci/step-roles sets them, and runs the tests as the application role.
var envBare = map[sqllock.Dialect]string{
	sqllock.Postgres: "SQLLOCK_BARE_POSTGRES_DSN",
	sqllock.MariaDB:  "SQLLOCK_BARE_MYSQL_DSN",
	sqllock.MySQL:    "SQLLOCK_BARE_MYSQL_DSN",
}

// envLocks names, per dialect, a DSN of a role with tablelock's grants
// alone (its table, the token source, the version table): what the
// newer features need beyond them shows as the table the server names.
var envLocks = map[sqllock.Dialect]string{
	sqllock.Postgres: "SQLLOCK_LOCKS_POSTGRES_DSN",
	sqllock.MariaDB:  "SQLLOCK_LOCKS_MYSQL_DSN",
	sqllock.MySQL:    "SQLLOCK_LOCKS_MYSQL_DSN",
}

// TestLeastPrivilege, run as the application role of docs/operations.md's "Roles
// and grants": the role is no superuser and cannot signal other backends
// (PostgreSQL) and has no SUPER or PROCESS (MariaDB), yet takes and
// releases a lock, and uses every feature the grants list (semaphore,
// rwlock, election, an audited force release, fence, jobguard); a role
// without the grants cannot write a lock row or draw a token, gets the
// server's permission error, and writes nothing; a role with tablelock's
// grants alone is refused the newer features, the error naming the table
// it lacks, and leaves nothing held. On the MySQL path
// (SQLLOCK_MYSQL_COMMON=1) the subtest is mysql, on MariaDB's own mariadb.
func TestLeastPrivilege(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, testdb.MySQL()} {
		t.Run(d.String(), func(t *testing.T) {
			bareDSN := os.Getenv(envBare[d])
			if bareDSN == "" {
				t.Skipf("%s is not set: .ci/step-roles runs this test as a role of its own", envBare[d])
			}
			ctx := context.Background()
			app := testdb.Open(t, d)
			checkUnprivileged(t, app)

			key := locktest.Key(t)
			l, err := tablelock.New(app.DB, d)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			lease, err := l.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("the application role cannot lock: %v", err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			everyFeature(t, app, key)

			bare, err := sql.Open(app.Driver, bareDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer bare.Close()
			bl, err := tablelock.New(bare, d)
			if err != nil {
				t.Fatal(err)
			}
			defer bl.Close()
			denied := key + "-denied"
			_, err = bl.TryAcquire(ctx, denied)
			// On MariaDB and MySQL the library may look for its token
			// function before the first statement, and a user without
			// EXECUTE cannot see it: its error says which grant is missing.
			refused := permissionDenied(err) ||
				d.IsMySQL() && err != nil && strings.Contains(err.Error(), "GRANT EXECUTE ON FUNCTION sqllock_next_token")
			if !refused || errors.Is(err, sqllock.ErrNotAcquired) || !strings.Contains(err.Error(), denied) {
				t.Fatalf("TryAcquire without the grants: %v; want the server's permission error, naming the key", err)
			}
			t.Logf("lock row without the grants: %v", err)
			var n int
			q := `SELECT count(*) FROM sqllock_locks WHERE lock_key = ?`
			if d == sqllock.Postgres {
				q = `SELECT count(*) FROM sqllock_locks WHERE lock_key = $1`
			}
			if err := app.QueryRowContext(ctx, q, denied).Scan(&n); err != nil || n != 0 {
				t.Fatalf("rows for the refused key: %d, %v; want none", n, err)
			}

			draws := map[sqllock.Dialect][]string{
				sqllock.Postgres: {`SELECT sqllock_next_token()`, `SELECT nextval('sqllock_fence_seq')`},
				sqllock.MariaDB:  {`SELECT NEXTVAL(sqllock_fence_seq)`},
				sqllock.MySQL:    {`SELECT sqllock_next_token()`},
			}[d]
			for _, q := range draws {
				var tok int64
				err := bare.QueryRowContext(ctx, q).Scan(&tok)
				if !permissionDenied(err) {
					t.Fatalf("%s without the grants: %d, %v; want the server's permission error", q, tok, err)
				}
				t.Logf("%s without the grants: %v", q, err)
			}

			if dsn := os.Getenv(envLocks[d]); dsn != "" {
				locksOnly(t, app, dsn, key)
			} else {
				t.Logf("%s is not set: the newer features' own grants are not checked apart", envLocks[d])
			}
		})
	}
}

// everyFeature uses, as app's role, each feature the grants of docs/operations.md
// list beyond tablelock, failing with the feature's name.
func everyFeature(t *testing.T, app *testdb.DB, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := app.Dialect
	t.Run("semaphore", func(t *testing.T) {
		s, err := semaphore.New(app.DB, d)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		p, err := s.TryAcquire(ctx, key+"-sem", 2)
		if err != nil {
			t.Fatalf("the application role cannot take a permit: %v", err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("rwlock", func(t *testing.T) {
		rw, err := rwlock.New(app.DB, d, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close()
		r, err := rw.TryRLock(ctx, key+"-rw")
		if err != nil {
			t.Fatalf("the application role cannot read-lock: %v", err)
		}
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := rw.TryLock(ctx, key+"-rw")
		if err != nil {
			t.Fatalf("the application role cannot write-lock: %v", err)
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("election", func(t *testing.T) {
		e, err := election.New(app.DB, d)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		lead, err := e.Campaign(ctx, key+"-elect", "app")
		if err != nil {
			t.Fatalf("the application role cannot campaign: %v", err)
		}
		if ld, err := e.Leader(ctx, key+"-elect"); err != nil || ld.Term != lead.Term() {
			t.Errorf("Leader = %+v, %v; want term %d", ld, err, lead.Term())
		}
		if err := lead.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("force-release", func(t *testing.T) {
		l, err := tablelock.New(app.DB, d)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		k := key + "-force"
		lease, err := l.TryAcquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		freed, err := l.ForceRelease(ctx, k, lease.Token(), tablelock.Reason("least privilege"))
		if err != nil || !freed {
			t.Fatalf("the application role cannot force a release: %v, %v", freed, err)
		}
		trail, err := tablelock.AuditLog(ctx, app.DB)
		if err != nil {
			t.Fatalf("the application role cannot read the audit trail: %v", err)
		}
		found := false
		for _, e := range trail {
			found = found || (e.Key == k && e.Token == lease.Token() && e.Reason == "least privilege")
		}
		if !found {
			t.Errorf("no audit record of the force release of %q token %d", k, lease.Token())
		}
	})
	t.Run("fence", func(t *testing.T) {
		f, err := fence.New(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Check(ctx, app.DB, key+"-fence", 7); err != nil {
			t.Fatalf("the application role cannot record a token: %v", err)
		}
		if last, err := f.Last(ctx, app.DB, key+"-fence"); err != nil || last != 7 {
			t.Errorf("Last = %d, %v; want 7", last, err)
		}
	})
	t.Run("jobguard", func(t *testing.T) {
		g, err := jobguard.New(app.DB, d)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		l, err := g.TryAcquire(ctx, jobguard.Job{Name: key + "-job", AtMost: time.Minute})
		if err != nil {
			t.Fatalf("the application role cannot take a job: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// locksOnly checks, as a role with tablelock's grants alone (dsn), that
// each newer feature is refused with the server's permission error naming
// the table docs/operations.md grants it and the key, and leaves nothing held.
func locksOnly(t *testing.T, app *testdb.DB, dsn, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := app.Dialect
	db, err := sql.Open(app.Driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	denied := func(t *testing.T, what string, err error, table, key string) {
		t.Helper()
		if !permissionDenied(err) || errors.Is(err, sqllock.ErrNotAcquired) || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), key) {
			t.Fatalf("%s with tablelock's grants alone: %v; want the server's permission error on %s, naming %q", what, err, table, key)
		}
		t.Logf("%s with tablelock's grants alone: %v", what, err)
	}

	l, err := tablelock.New(db, d)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, key+"-locks")
	if err != nil {
		t.Fatalf("tablelock's grants do not serve tablelock: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("semaphore", func(t *testing.T) {
		s, err := semaphore.New(db, d)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.TryAcquire(ctx, key+"-sem-denied", 2)
		denied(t, "a permit", err, semaphore.DefaultTable, key+"-sem-denied")
		rw, err := rwlock.New(db, d, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close()
		_, err = rw.TryRLock(ctx, key+"-rw-denied")
		denied(t, "a read lock", err, rwlock.DefaultTable, key+"-rw-denied")
	})
	t.Run("election", func(t *testing.T) {
		e, err := election.New(db, d)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		name := key + "-elect-denied"
		_, err = e.Campaign(ctx, name, "refused")
		denied(t, "a campaign", err, election.Table, name)
		// The refused campaign gave its lease back: the application role
		// leads at once, not after a TTL.
		ae, err := election.New(app.DB, d)
		if err != nil {
			t.Fatal(err)
		}
		defer ae.Close()
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		defer acancel()
		lead, err := ae.Campaign(actx, name, "app")
		if err != nil {
			t.Fatalf("after a refused campaign: %v; want the leadership free", err)
		}
		if err := lead.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("force-release", func(t *testing.T) {
		al, err := tablelock.New(app.DB, d)
		if err != nil {
			t.Fatal(err)
		}
		defer al.Close()
		k := key + "-force-denied"
		held, err := al.TryAcquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.ForceRelease(ctx, k, held.Token(), tablelock.Reason("refused"))
		denied(t, "a force release", err, "sqllock_audit", k)
		// Nothing freed: the holder still holds and releases as its own.
		if err := held.Release(ctx); err != nil {
			t.Fatalf("the holder after a refused force release: %v; want still held", err)
		}
	})
}

// checkUnprivileged fails the test unless db's role is as small as the
// docs/operations.md says the application role may be.
func checkUnprivileged(t *testing.T, db *testdb.DB) {
	t.Helper()
	ctx := context.Background()
	switch db.Dialect {
	case sqllock.Postgres:
		var super, signal, create bool
		err := db.QueryRowContext(ctx, `SELECT rolsuper, pg_has_role(current_user, 'pg_signal_backend', 'USAGE'),
			has_schema_privilege(current_user, current_schema(), 'CREATE')
			FROM pg_roles WHERE rolname = current_user`).Scan(&super, &signal, &create)
		if err != nil {
			t.Fatal(err)
		}
		if super || signal || create {
			t.Fatalf("the application role has superuser %v, pg_signal_backend %v, CREATE on its schema %v: want none", super, signal, create)
		}
	case sqllock.MariaDB:
		rows, err := db.QueryContext(ctx, `SHOW GRANTS FOR CURRENT_USER()`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var g string
			if err := rows.Scan(&g); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"ALL PRIVILEGES", "SUPER", "PROCESS", "CREATE", "CONNECTION ADMIN"} {
				if strings.Contains(strings.ToUpper(g), p) {
					t.Fatalf("the application user holds %s: %s", p, g)
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// permissionDenied: PostgreSQL's insufficient_privilege (42501) and
// MariaDB's "command denied to user ... for table" (1142) or "... for
// routine" (1370); not an error at connection time, which would show
// nothing about the grants.
func permissionDenied(err error) bool {
	if err == nil {
		return false
	}
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) && pg.SQLState() == "42501" {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "Error 1142") || strings.Contains(s, "Error 1370")
}
