package sqlweb_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/sqlweb"
	"github.com/sqllock/sqllock/tablelock"
)

// TestReadOnlyRefusesRelease: without WithForce, a release (the form and
// the post, token or not) is refused with 403 and the key stays held;
// with WithForce, a post without the token is refused too.
func TestReadOnlyRefusesRelease(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "l.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := migrations.Up(ctx, db, sqllock.SQLite); err != nil {
		t.Fatal(err)
	}
	l, err := tablelock.New(db, sqllock.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	form := url.Values{"table": {tablelock.DefaultTable}, "row": {"k"}, "token": {strconv.FormatInt(lease.Token(), 10)}, "reason": {"r"}}
	for _, tc := range []struct {
		name string
		opts []sqlweb.Option
		auth string
	}{
		{"read only", nil, ""},
		{"read only, a token", nil, "guess"},
		{"force, no token", []sqlweb.Option{sqlweb.WithForce("s3cret")}, ""},
		{"force, a wrong token", []sqlweb.Option{sqlweb.WithForce("s3cret")}, "s3cre"},
	} {
		srv := httptest.NewServer(sqlweb.Handler(db, sqllock.SQLite, tc.opts...))
		form.Set("auth", tc.auth)
		resp, err := http.PostForm(srv.URL+"/release", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: POST /release: %s, want 403", tc.name, resp.Status)
		}
		srv.Close()
	}
	if lease.Err() != nil {
		t.Fatalf("the lease ended: %v", lease.Err())
	}
	infos, err := l.List(ctx)
	if err != nil || len(infos) != 1 {
		t.Errorf("the key is no longer held: %v %v", infos, err)
	}
}
