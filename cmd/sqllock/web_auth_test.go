package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/tablelock"
)

// TestWebBasicAuth: with $SQLLOCK_WEB_BASIC_AUTH set, every address of the
// page answers 401 without the user and password, or with a wrong one,
// and 200 with them; the password is never printed. Basic auth alone
// releases nothing: a release needs --allow-force too. With it, the
// credentials stand for the token, and a release posted from another
// site (which a browser would send them with) is refused.
func TestWebBasicAuth(t *testing.T) {
	d := migrated(t, sqllock.SQLite)
	user, password := "ops", fmt.Sprintf("pa:ss-%x", rand.Uint32()) // a colon in the password
	env := []string{"SQLLOCK_WEB_BASIC_AUTH=" + user + ":" + password}

	l, err := tablelock.New(d.db, d.dialect, tablelock.WithNotify(false))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := fmt.Sprintf("guarded/%x", rand.Uint32())
	lease, err := l.Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	form := neturl.Values{"table": {tablelock.DefaultTable}, "row": {key}, "token": {fmt.Sprint(lease.Token())}, "reason": {"INC-auth"}}

	type req struct {
		method, path   string
		user, password string
		crossSite      bool
	}
	do := func(base string, r req) (int, string) {
		t.Helper()
		var body io.Reader
		if r.method == http.MethodPost {
			body = strings.NewReader(form.Encode())
		}
		hr, err := http.NewRequest(r.method, base+r.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if r.method == http.MethodPost {
			hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if r.user != "" {
			hr.SetBasicAuth(r.user, r.password)
		}
		if r.crossSite {
			hr.Header.Set("Sec-Fetch-Site", "cross-site")
			hr.Header.Set("Origin", "https://elsewhere.example")
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s /%s: 401 with no Basic challenge", r.method, r.path)
		}
		return resp.StatusCode, string(b)
	}

	// Read only: the page behind basic auth.
	url, _, c := startWebEnv(t, env, d.dsn)
	if line := c.wait(t, "basic auth: "); strings.Contains(line, password) || !strings.Contains(line, user) {
		t.Errorf("the command printed %q: want the user named and the password not", line)
	}
	for _, path := range []string{"", "fragment", "static/web.js", "release?table=x&row=y&token=1"} {
		for _, r := range []req{{method: "GET", path: path}, {method: "GET", path: path, user: user, password: password + "x"}, {method: "GET", path: path, user: "root", password: password}} {
			if code, _ := do(url, r); code != http.StatusUnauthorized {
				t.Errorf("GET /%s as %q: %d, want 401", path, r.user, code)
			}
		}
	}
	if code, body := do(url, req{method: "GET", user: user, password: password}); code != http.StatusOK || !strings.Contains(body, key) {
		t.Errorf("GET / with the credentials: %d, want 200 and the held key\n%s", code, body)
	}
	if code, _ := do(url, req{method: "POST", path: "release"}); code != http.StatusUnauthorized {
		t.Errorf("POST /release without the credentials: %d, want 401", code)
	}
	if code, _ := do(url, req{method: "POST", path: "release", user: user, password: password}); code != http.StatusForbidden {
		t.Errorf("POST /release with the credentials but no --allow-force: %d, want 403", code)
	}
	if !lockHeld(t, d, key) {
		t.Fatal("a page without --allow-force released the key")
	}

	// --allow-force behind basic auth: no token; a cross-site post refused.
	url, token, _ := startWebEnv(t, env, d.dsn, "--allow-force")
	if token != "" {
		t.Errorf("--allow-force behind basic auth printed a token %q", token)
	}
	if code, body := do(url, req{method: "GET", path: "release?" + neturl.Values{"table": form["table"], "row": form["row"], "token": form["token"]}.Encode(), user: user, password: password}); code != http.StatusOK || strings.Contains(body, `name="auth"`) {
		t.Errorf("the release form: %d, want 200 and no token field\n%s", code, body)
	}
	if code, _ := do(url, req{method: "POST", path: "release"}); code != http.StatusUnauthorized {
		t.Errorf("POST /release without the credentials: %d, want 401", code)
	}
	if code, _ := do(url, req{method: "POST", path: "release", user: user, password: password, crossSite: true}); code != http.StatusForbidden {
		t.Errorf("POST /release from another site: %d, want 403", code)
	}
	if !lockHeld(t, d, key) {
		t.Fatal("a refused release freed the key")
	}
	if code, body := do(url, req{method: "POST", path: "release", user: user, password: password}); code != http.StatusOK || !strings.Contains(body, "Released") {
		t.Fatalf("POST /release with the credentials: %d\n%s", code, body)
	}
	if lockHeld(t, d, key) {
		t.Error("the release behind basic auth left the key held")
	}
}
