package sqlweb_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/sqlweb"
	"github.com/sqllock/sqllock/tablelock"
)

// TestReadOnlyRefusesRelease: without WithForce, a release (the form and
// the post, token or not) is refused with 403 and the key stays held;
// with WithForce, a post without the token is refused too.
func TestReadOnlyRefusesRelease(t *testing.T) {
	db := testdb.SQLiteFile(t, 5000)
	ctx := context.Background()
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

// TestEveryKindRendered: a semaphore's permits, an rwlock's readers and
// writer and an election's leader each show in their own group, under
// the names the application gave (never the row's suffix or the
// election's prefix), with the leader's value; and a permit forced from
// the page is freed and audited as the permit it was.
func TestEveryKindRendered(t *testing.T) {
	db := testdb.SQLiteFile(t, 5000)
	ctx := context.Background()
	opts := []tablelock.Option{tablelock.WithNotify(false)}
	sem, err := semaphore.New(db, sqllock.SQLite, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer sem.Close()
	p, err := sem.Acquire(ctx, "exports", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	rw, err := rwlock.New(db, sqllock.SQLite, 4, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	r, err := rw.RLock(ctx, "catalog")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	w, err := rw.Lock(ctx, "config")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(ctx)
	el, err := election.New(db, sqllock.SQLite, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer el.Close()
	leader, err := el.Campaign(ctx, "scheduler", "http://10.0.0.7:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Resign(ctx)

	srv := httptest.NewServer(sqlweb.Handler(db, sqllock.SQLite))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/fragment")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	for _, want := range []string{
		`id="kind-semaphore"`, `data-kind="semaphore" data-key="exports"`,
		`id="kind-rwlock"`, `data-kind="rwlock" data-key="catalog"`, `data-kind="rwlock" data-key="config"`,
		`id="kind-leader"`, `data-kind="leader" data-key="scheduler"`, `http://10.0.0.7:8080`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %s", want)
		}
	}
	for _, bad := range []string{"\x1f", election.KeyPrefix} {
		if strings.Contains(page, bad) {
			t.Errorf("the page shows a row's stored key (%q)", bad)
		}
	}
	if t.Failed() {
		t.Log(page)
	}

	// Forced from the page, a permit is freed and audited as a permit.
	fsrv := httptest.NewServer(sqlweb.Handler(db, sqllock.SQLite, sqlweb.WithForce("s3cret")))
	defer fsrv.Close()
	resp, err = http.Get(fsrv.URL + "/fragment")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var form url.Values
	for _, m := range regexp.MustCompile(`href="release\?([^"]*)"`).FindAllStringSubmatch(string(b), -1) {
		q, err := url.ParseQuery(html.UnescapeString(m[1]))
		if err == nil && q.Get("table") == semaphore.DefaultTable && strings.HasPrefix(q.Get("row"), "exports#") {
			form = q
		}
	}
	if form == nil {
		t.Fatalf("no release link for the permit:\n%s", b)
	}
	form.Set("reason", "INC-9")
	form.Set("auth", "s3cret")
	resp, err = http.PostForm(fsrv.URL+"/release", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /release of the permit: %s", resp.Status)
	}
	audit, err := tablelock.AuditLog(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Table != semaphore.DefaultTable || audit[0].Key != form.Get("row") || audit[0].Reason != "INC-9" || audit[0].Token != p.Token() {
		t.Errorf("audit trail %+v; want the permit %s, token %d, reason INC-9", audit, form.Get("row"), p.Token())
	}
}
