package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/cmd/sqllock/internal/bench"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/sqlweb"
	"github.com/sqllock/sqllock/tablelock"
)

// webEvery is the page's refresh in these tests: short, so that a few
// refreshes take a second.
const webEvery = "300ms"

// browser starts a headless Chromium for the test, with a fresh profile
// and every flag that keeps it off the network. It fails when there is
// no Chromium, unless SQLLOCK_NO_BROWSER says to skip.
func browser(t *testing.T) context.Context {
	t.Helper()
	if os.Getenv("SQLLOCK_NO_BROWSER") != "" {
		t.Skip("SQLLOCK_NO_BROWSER is set: the browser tests do not run")
	}
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("no chromium on PATH (apt-get install chromium; .ci/run installs it), and SQLLOCK_NO_BROWSER is not set")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	// No timeout on the context of the first call: it would end the
	// browser. The test's own -timeout bounds it.
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// proc is a process of the built binary whose stdout lines the test reads.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
}

// startChild runs the binary with args and waits for a line that starts
// with prefix, which it returns.
func startChild(t *testing.T, prefix string, args ...string) (*proc, string) {
	t.Helper()
	c := spawn(t, args...)
	return c, c.wait(t, prefix)
}

// spawn runs the binary with args, its stdout lines read by the test.
func spawn(t *testing.T, args ...string) *proc {
	t.Helper()
	return spawnEnv(t, nil, args...)
}

// spawnEnv is spawn with env (NAME=value) added to the environment.
func spawnEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "SQLLOCK_DSN=", "SQLLOCK_WEB_TOKEN=", "SQLLOCK_WEB_BASIC_AUTH="), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &proc{cmd: cmd, lines: make(chan string, 100)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

// wait returns the next line that starts with prefix.
func (c *proc) wait(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("sqllock %s ended without a line %q", strings.Join(c.cmd.Args[1:], " "), prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("sqllock %s: no line %q in a minute", strings.Join(c.cmd.Args[1:], " "), prefix)
		}
	}
}

var urlRE = regexp.MustCompile(`at (http://\S+/) \(`)

// startWeb runs `sqllock web` on a free port and returns its URL and the
// force token it printed ("" without --allow-force).
func startWeb(t *testing.T, dsn string, extra ...string) (url, token string) {
	t.Helper()
	url, token, _ = startWebEnv(t, nil, dsn, extra...)
	return url, token
}

// startWebEnv is startWeb with env added to the command's environment; it
// returns the process too.
func startWebEnv(t *testing.T, env []string, dsn string, extra ...string) (url, token string, c *proc) {
	t.Helper()
	args := append([]string{"web", "--dsn", dsn, "--addr", "127.0.0.1:0", "--every", webEvery}, extra...)
	c = spawnEnv(t, env, args...)
	line := c.wait(t, "serving the holds of ")
	m := urlRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no URL in %q", line)
	}
	if strings.Contains(line, "force release on") {
		token = strings.TrimPrefix(c.wait(t, "force token: "), "force token: ")
	}
	return m[1], token, c
}

var heldRE = regexp.MustCompile(`token (\d+) host`)

// holdFrom holds key from another process (sqllock hold) as owner, and
// returns it with the token it was given.
func holdFrom(t *testing.T, dsn, key, owner string) (*proc, int64) {
	t.Helper()
	c, line := startChild(t, "held ", "hold", key, "--owner", owner, "--for", "2m", "--dsn", dsn)
	m := heldRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no token in %q", line)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return c, n
}

// release ends a hold of holdFrom the way Ctrl-C does, and waits until it
// is released.
func (c *proc) release(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "released ")
}

// jsUntil evaluates expr in the page until it is true.
func jsUntil(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("#live")))
			t.Fatalf("%s: not seen in 30s; the page shows:\n%s", what, html)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jsInt evaluates expr in the page, a number.
func jsInt(t *testing.T, ctx context.Context, expr string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return n
}

// jsString evaluates expr in the page, a string.
func jsString(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// rowSel is the CSS selector of the row of kind and key (keys here are
// plain: letters, digits, / and -).
func rowSel(kind, key string) string {
	return fmt.Sprintf(`#live tr.hold[data-kind=%q][data-key=%q]`, kind, key)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err = os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// TestWebPageInBrowser: on each dialect, `sqllock web` serves a page that
// a real browser renders and refreshes by itself: a lock held by another
// process shows with its key, holder and token; a released key is gone
// within two refreshes; a job run shows among the runs; and the key's
// chart has one point per hold the page saw (two holds, two points).
func TestWebPageInBrowser(t *testing.T) {
	ctx := browser(t)
	forEachDB(t, func(t *testing.T, d dbTarget) {
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0)
		url, _ := startWeb(t, d.dsn)
		id := fmt.Sprintf("%x", rand.Uint32())
		key, owner := "orders/"+id, "billing-"+id
		holder, token := holdFrom(t, d.dsn, key, owner)

		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			t.Fatal(err)
		}
		jsUntil(t, ctx, "the held key", fmt.Sprintf(`document.querySelector(%q) !== null`, rowSel("lock", key)))
		text := jsString(t, ctx, fmt.Sprintf(`document.querySelector(%q).innerText`, rowSel("lock", key)))
		for _, want := range []string{key, owner, strconv.FormatInt(token, 10)} {
			if !strings.Contains(text, want) {
				t.Errorf("the row of %s reads %q: no %q", key, text, want)
			}
		}
		// It came from the page's own refresh, not only the first render.
		jsUntil(t, ctx, "a refresh", `Number(document.getElementById("live").dataset.refreshes || 0) >= 1`)

		// A job run, taken in this process.
		g, err := jobguard.New(d.db, d.dialect)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		jobName := "reports/" + id
		job, err := g.TryAcquire(context.Background(), jobguard.Job{Name: jobName, AtMost: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer job.Release(context.Background())
		jsUntil(t, ctx, "the job run", fmt.Sprintf(`document.querySelector('#jobs tr.run[data-key=%q]') !== null`, jobName))
		if txt := jsString(t, ctx, fmt.Sprintf(`document.querySelector('#jobs tr.run[data-key=%q]').innerText`, jobName)); !strings.Contains(txt, strconv.FormatInt(job.Token(), 10)) {
			t.Errorf("the job run reads %q: no token %d", txt, job.Token())
		}
		screenshot(t, ctx, "web-"+d.dialect.String()+".png")

		// Released: gone within two refreshes of the release.
		holder.release(t)
		before := jsInt(t, ctx, `Number(document.getElementById("live").dataset.refreshes || 0)`)
		jsUntil(t, ctx, "the released key gone", fmt.Sprintf(`document.querySelector(%q) === null`, rowSel("lock", key)))
		if after := jsInt(t, ctx, `Number(document.getElementById("live").dataset.refreshes || 0)`); after > before+2 {
			t.Errorf("the released key was still shown %d refreshes after its release; want at most 2", after-before)
		}

		// A second hold of the key: the chart has a point per hold seen.
		holder2, _ := holdFrom(t, d.dsn, key, owner+"-2")
		jsUntil(t, ctx, "the second hold", fmt.Sprintf(`document.querySelector(%q) !== null && document.querySelector(%q).innerText.includes(%q)`,
			rowSel("lock", key), rowSel("lock", key), owner+"-2"))
		chart := fmt.Sprintf(`#charts .chart[data-kind="lock"][data-key=%q] circle.pt`, key)
		if n := jsInt(t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, chart)); n != 2 {
			t.Errorf("the chart of %s has %d points, want 2 (one per hold seen)", key, n)
		}
		// PostgreSQL keeps a queue in the row: an Acquire of another
		// process blocked on the key shows as a wait point in the key's
		// waits chart, orange while it waits, grey once the key is its.
		if d.dialect == sqllock.Postgres {
			waiter := spawn(t, "hold", key, "--owner", "waiter-"+id, "--for", "2m", "--dsn", d.dsn)
			waits := fmt.Sprintf(`#keywaits .chart[data-kind="lock"][data-key=%q] circle.wait`, key)
			jsUntil(t, ctx, "a wait point", fmt.Sprintf(`document.querySelectorAll(%q).length === 1`, waits))
			jsUntil(t, ctx, "a wait of a refresh or more", fmt.Sprintf(`/[1-9]/.test(document.querySelector(%q).textContent)`, waits))
			holder2.release(t)
			waiter.wait(t, "held ")
			jsUntil(t, ctx, "the wait over", fmt.Sprintf(`document.querySelector(%q + '[fill="#8c959f"]') !== null`, waits))
			if n := jsInt(t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, waits)); n != 1 {
				t.Errorf("the waits chart of %s has %d points, want 1 (one per waiter seen)", key, n)
			}
			waiter.release(t)
			return
		}
		holder2.release(t)
	})
}

// TestWebForceRelease: with --allow-force, the release form without the
// token is refused and frees nothing; with it the holder shown is freed,
// the audit row is written with the reason, and the page lists it.
func TestWebForceRelease(t *testing.T) {
	ctx := browser(t)
	forEachDB(t, func(t *testing.T, d dbTarget) {
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0)
		url, token := startWeb(t, d.dsn, "--allow-force")
		if token == "" {
			t.Fatal("--allow-force printed no token")
		}
		id := fmt.Sprintf("%x", rand.Uint32())
		key := "stuck/" + id
		holder, tok := holdFrom(t, d.dsn, key, "cron-"+id)
		reason := "INC-" + id
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			t.Fatal(err)
		}
		jsUntil(t, ctx, "the held key", fmt.Sprintf(`document.querySelector(%q) !== null`, rowSel("lock", key)))
		submit := func(auth string) string {
			t.Helper()
			if err := chromedp.Do(ctx,
				chromedp.Navigate(url),
				chromedp.WaitVisible(chromedp.CSS(rowSel("lock", key)+" a.force")),
				chromedp.Click(chromedp.CSS(rowSel("lock", key)+" a.force")),
				chromedp.WaitVisible(chromedp.ID("reason")),
				chromedp.SendKeys(chromedp.ID("reason"), reason),
				chromedp.SendKeys(chromedp.ID("auth"), auth),
				chromedp.Click(chromedp.ID("submit")),
				chromedp.WaitVisible(chromedp.ID("message")),
			); err != nil {
				t.Fatal(err)
			}
			return jsString(t, ctx, `document.getElementById("message").innerText`)
		}
		if msg := submit("not-the-token"); !strings.Contains(msg, "Refused") {
			t.Errorf("a release with a wrong token says %q; want it refused", msg)
		}
		if held := lockHeld(t, d, key); !held {
			t.Fatal("a refused release freed the key")
		}
		if msg := submit(token); !strings.Contains(msg, "Released") {
			t.Fatalf("a release with the token says %q", msg)
		}
		if lockHeld(t, d, key) {
			t.Error("the release with the token left the key held")
		}
		audit, err := tablelock.AuditLog(context.Background(), d.db)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, a := range audit {
			if a.Key == key {
				found++
				if a.Reason != reason || a.Token != tok || a.Owner != "cron-"+id || a.Action != "force-release" {
					t.Errorf("audit row %+v; want reason %q, token %d, owner cron-%s", a, reason, tok, id)
				}
			}
		}
		if found != 1 {
			t.Errorf("%d audit rows for %s, want 1", found, key)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			t.Fatal(err)
		}
		jsUntil(t, ctx, "the audit row on the page", fmt.Sprintf(`Array.from(document.querySelectorAll("#audit tr.audit")).some(r => r.innerText.includes(%q) && r.innerText.includes(%q))`, key, reason))
		_ = holder
	})
}

// lockHeld reports whether key is held in the lock table.
func lockHeld(t *testing.T, d dbTarget, key string) bool {
	t.Helper()
	l, err := tablelock.New(d.db, d.dialect, tablelock.WithNotify(false))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	infos, err := l.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Key == key {
			return true
		}
	}
	return false
}

// TestWebEscapesAndCSP: every response carries the strict
// Content-Security-Policy, and a key and owner holding markup (a <script>
// element, an <img> with an onerror handler) are rendered as text: the
// browser shows them verbatim and runs neither.
func TestWebEscapesAndCSP(t *testing.T) {
	ctx := browser(t)
	d := migrated(t, sqllock.SQLite)
	url, _ := startWeb(t, d.dsn, "--allow-force")
	for _, path := range []string{"", "fragment", "static/web.js", "release?table=x&row=y&token=1"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Content-Security-Policy"); got != sqlweb.CSP {
			t.Errorf("GET /%s: Content-Security-Policy %q, want %q", path, got, sqlweb.CSP)
		}
		for _, want := range []string{"'unsafe-inline'", "'unsafe-eval'", "*"} {
			if strings.Contains(sqlweb.CSP, want) {
				t.Errorf("the policy allows %s", want)
			}
		}
	}
	key := `<script>window.pwned = 1</script>keys/x`
	owner := `<img src=x onerror="window.pwned = 2">`
	l, err := tablelock.New(d.db, d.dialect, tablelock.WithNotify(false))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.Acquire(sqllock.WithOwner(context.Background(), owner), key)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	// Both the first render and a refresh by the script.
	jsUntil(t, ctx, "a refresh", `Number(document.getElementById("live").dataset.refreshes || 0) >= 1`)
	rows := `Array.from(document.querySelectorAll("#live tr.hold"))`
	if got := jsString(t, ctx, rows+`.map(r => r.querySelector("td.key").textContent).join("|")`); got != key {
		t.Errorf("the key cell reads %q, want the key as text %q", got, key)
	}
	if got := jsString(t, ctx, rows+`.map(r => r.querySelector("td.owner").textContent).join("|")`); got != owner {
		t.Errorf("the owner cell reads %q, want %q", got, owner)
	}
	if n := jsInt(t, ctx, `document.querySelectorAll("#live script, #live img").length`); n != 0 {
		t.Errorf("the page has %d script or img elements in its holds: markup of the key got through", n)
	}
	if got := jsString(t, ctx, `typeof window.pwned`); got != "undefined" {
		t.Errorf("window.pwned is %s: the key's script ran", got)
	}
	// The chart's label and the release form name it as text too.
	if got := jsString(t, ctx, `document.querySelector("#charts .chart").dataset.key`); got != key {
		t.Errorf("the chart is labelled %q", got)
	}
	screenshot(t, ctx, "web-escaped.png")
}

// TestWebStatementsPerRefresh measures the page's cost to the database:
// the statements one refresh sends, counted by the driver (bench.CountingDB),
// with one lock held; and that a second page within half a refresh
// interval is served from the same read, sending none. docs/web.md
// states these figures.
func TestWebStatementsPerRefresh(t *testing.T) {
	// Every dialect: the three lock tables, the jobs' next due (every
	// job's, for skipped firings), the audit trail. PostgreSQL adds
	// pg_locks, the waiting and the listening sessions and the queues of
	// the three tables; MySQL @@performance_schema (and its locks where it
	// is on).
	want := map[sqllock.Dialect]int64{sqllock.Postgres: 9, sqllock.MariaDB: 6, sqllock.MySQL: 6, sqllock.SQLite: 5}
	forEachDB(t, func(t *testing.T, d dbTarget) {
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0)
		if d.dialect.IsMySQL() {
			var ps int64
			if err := d.db.QueryRow(`SELECT @@performance_schema`).Scan(&ps); err != nil {
				t.Fatal(err)
			}
			want[d.dialect] += ps
		}
		tg, err := dbFlags{dsn: d.dsn}.resolve()
		if err != nil {
			t.Fatal(err)
		}
		var n atomic.Int64
		db, err := bench.CountingDB(benchTarget(tg), &n)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		l, err := tablelock.New(d.db, d.dialect, tablelock.WithNotify(false))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lease, err := l.Acquire(context.Background(), "counted/"+fmt.Sprintf("%x", rand.Uint32()))
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(context.Background())

		const every = time.Second
		srv := httptest.NewServer(sqlweb.Handler(db, d.dialect, sqlweb.WithRefresh(every)))
		defer srv.Close()
		get := func() {
			t.Helper()
			resp, err := http.Get(srv.URL + "/fragment")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "counted/") || strings.Contains(string(body), "failed") {
				t.Fatalf("GET /fragment: %s\n%s", resp.Status, body)
			}
		}
		get() // the first also opens the readers: not a refresh
		for range 2 {
			time.Sleep(every/2 + 50*time.Millisecond)
			before := n.Load()
			get()
			per := n.Load() - before
			t.Logf("%v: %d statements per refresh", d.dialect, per)
			if per != want[d.dialect] {
				t.Errorf("%v: a refresh sent %d statements; docs/web.md says %d", d.dialect, per, want[d.dialect])
			}
			before = n.Load()
			get()
			if again := n.Load() - before; again != 0 {
				t.Errorf("%v: a second page within half a refresh sent %d statements, want 0", d.dialect, again)
			}
		}
	})
}

// TestPgBouncerWeb: through PgBouncer in transaction mode
// (sqllock_pooler=transaction), the page lists a lock held by another
// process through the same proxy, with its holder and token, and drops it
// once released.
func TestPgBouncerWeb(t *testing.T) {
	testdb.PgBouncer(t) // migrates the database behind it; skips without one
	dsn := withPooler(t, os.Getenv(testdb.EnvPgBouncer))
	ctx := browser(t)
	checkWebThrough(t, ctx, dsn)
}

// TestWebPoolerMode: sqllock_pooler=transaction straight to PostgreSQL
// (no proxy): the page reads in the pooler mode (no session state, no
// pg_stat_activity) and still lists and drops a hold. The DSN carries a
// password (which loopback trust ignores): the page never shows it.
func TestWebPoolerMode(t *testing.T) {
	ctx := browser(t)
	d := migrated(t, sqllock.Postgres)
	u, err := neturl.Parse(withPooler(t, d.dsn))
	if err != nil {
		t.Fatal(err)
	}
	secret := fmt.Sprintf("hunter%x", rand.Uint32())
	u.User = neturl.UserPassword(u.User.Username(), secret)
	checkWebThrough(t, ctx, u.String())
	page, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page, secret) || !strings.Contains(page, "sqllock: holds on") {
		t.Errorf("the page shows the DSN's password, or is not the page:\n%s", page)
	}
}

func checkWebThrough(t *testing.T, ctx context.Context, dsn string) {
	t.Helper()
	url, _ := startWeb(t, dsn)
	id := fmt.Sprintf("%x", rand.Uint32())
	key, owner := "pooled/"+id, "pooled-"+id
	holder, token := holdFrom(t, dsn, key, owner)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	jsUntil(t, ctx, "the held key", fmt.Sprintf(`document.querySelector(%q) !== null && document.querySelector(%q).innerText.includes(%q)`,
		rowSel("lock", key), rowSel("lock", key), fmt.Sprintf("%s\t", owner)))
	if txt := jsString(t, ctx, fmt.Sprintf(`document.querySelector(%q).innerText`, rowSel("lock", key))); !strings.Contains(txt, strconv.FormatInt(token, 10)) {
		t.Errorf("the row reads %q: no token %d", txt, token)
	}
	holder.release(t)
	jsUntil(t, ctx, "the released key gone", fmt.Sprintf(`document.querySelector(%q) === null`, rowSel("lock", key)))
}
