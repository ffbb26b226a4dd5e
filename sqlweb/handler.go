package sqlweb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/holds"
	"github.com/sqllock/sqllock/tablelock"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every response: this handler's
// own script and style sheet, nothing inline, nothing from elsewhere, no
// framing. The charts are inline SVG markup, which no directive governs.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Option configures Handler.
type Option func(*config)

type config struct {
	table     string
	namespace string
	every     time.Duration
	window    time.Duration
	force     string
	forceAuth bool // force release behind the basic auth alone
	user      string
	password  string
	pooler    bool
	title     string
	auditN    int
}

// WithTable lists the tablelock table name instead of
// tablelock.DefaultTable (the --table of `sqllock locks`).
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithNamespace names the advisory Lockers' namespace, to name their keys
// where the server shows them (advisory.WithNamespace).
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithRefresh sets how often the page reads the holds again; default 2s,
// at least 100ms.
func WithRefresh(d time.Duration) Option {
	return func(c *config) { c.every = max(d, 100*time.Millisecond) }
}

// WithWindow sets how far back the charts and job runs go; default 5m.
func WithWindow(d time.Duration) Option { return func(c *config) { c.window = d } }

// WithForce turns on force release, for a request that carries token. An
// empty token leaves the page read only.
func WithForce(token string) Option { return func(c *config) { c.force = token } }

// WithBasicAuth asks every request, for the page and for a release, for
// user and password (HTTP basic auth), compared in constant time. Empty
// ones turn nothing on. Basic auth sends them in the clear: serve the page
// on loopback or behind TLS.
func WithBasicAuth(user, password string) Option {
	return func(c *config) { c.user, c.password = user, password }
}

// WithForceByBasicAuth turns on force release for whoever passes
// WithBasicAuth, with no token of its own (WithForce adds one). Without
// WithBasicAuth it turns nothing on: the page stays read only.
func WithForceByBasicAuth() Option { return func(c *config) { c.forceAuth = true } }

// WithTransactionPooler reads through a transaction-pooling proxy
// (tablelock.WithTransactionPooler).
func WithTransactionPooler() Option { return func(c *config) { c.pooler = true } }

// WithTitle names the database in the page's title (never a DSN: it may
// hold a password); default the dialect's name.
func WithTitle(s string) Option { return func(c *config) { c.title = s } }

// Handler returns the page of db's holds. It serves "/" (the page),
// "/fragment" (the part that refreshes), "/release" (force release, with
// WithForce) and "/static/" (its script and style sheet). It starts no
// goroutine: it reads the tables when a page asks.
func Handler(db *sql.DB, d sqllock.Dialect, opts ...Option) http.Handler {
	c := config{table: tablelock.DefaultTable, namespace: "sqllock", every: 2 * time.Second, window: 5 * time.Minute, title: d.String(), auditN: 20}
	for _, o := range opts {
		o(&c)
	}
	if c.user == "" || c.password == "" {
		c.user, c.password, c.forceAuth = "", "", false
	}
	h := &handler{db: db, d: d, c: c, hist: newHistory(c.window)}
	sub, _ := fs.Sub(static, "static")
	h.tmpl = template.Must(template.New("").Funcs(template.FuncMap{"stamp": stamp, "span": span}).ParseFS(sub, "page.html"))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.page)
	mux.HandleFunc("GET /fragment", h.fragment)
	mux.HandleFunc("GET /release", h.releaseForm)
	mux.HandleFunc("POST /release", h.release)
	files := http.FileServerFS(sub)
	mux.Handle("GET /static/", http.StripPrefix("/static", noTemplates(files)))
	// A browser sends basic auth's credentials, as it does cookies, with a
	// form another site posts here: only this page's own may post.
	var next http.Handler = http.NewCrossOriginProtection().Handler(mux)
	if c.user != "" {
		next = basicAuth(c.user, c.password, next)
	}
	return secure(next)
}

// basicAuth serves next to a request with user and password only. It
// compares their hashes, in constant time whatever their lengths.
func basicAuth(user, password string, next http.Handler) http.Handler {
	wantU, wantP := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		gotU, gotP := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		if subtle.ConstantTimeCompare(gotU[:], wantU[:])&subtle.ConstantTimeCompare(gotP[:], wantP[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="sqllock", charset="UTF-8"`)
			http.Error(w, "401 Unauthorized: this page needs the user and password it was started with.", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// forceOn reports whether the page offers force release.
func (c *config) forceOn() bool { return c.force != "" || c.forceAuth }

// secure sets the headers every response carries.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", CSP)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// noTemplates serves the static files but the page's template.
func noTemplates(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ".js") && !strings.HasSuffix(r.URL.Path, ".css") {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type handler struct {
	db   *sql.DB
	d    sqllock.Dialect
	c    config
	tmpl *template.Template
	hist *history

	mu     sync.Mutex // guards src, last, lastAt; held while reading
	src    *holds.Source
	last   *snapshot
	lastAt time.Time
}

// snapshot is what one refresh read, ready to render.
type snapshot struct {
	At         time.Time
	Err        string
	Force      bool
	Groups     []groupView
	Waiters    []holds.Waiter
	Listening  int
	Jobs       []run
	Charts     []chart
	Waits      template.HTML
	KeyWaits   []keyWaits
	Skipped    []skip
	WaitsKnown string // what the dialect shows of waiters per key
	WaitingNow int
	Window     time.Duration
	Audit      []holds.AuditRow
	Notes      []string
	rows       []holds.Row
}

// read returns the holds as of at most half a refresh ago: however many
// pages are open, the tables are read once per half interval.
func (h *handler) read(ctx context.Context) *snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && time.Since(h.lastAt) < h.c.every/2 {
		return h.last
	}
	s := h.load(ctx)
	h.last, h.lastAt = s, time.Now()
	return s
}

func (h *handler) load(ctx context.Context) *snapshot {
	s := &snapshot{Force: h.c.forceOn(), Window: h.c.window}
	failed := func(err error) *snapshot {
		s.Err = err.Error()
		s.At = h.hist.now()
		return s
	}
	if h.src == nil {
		src, err := holds.Open(ctx, h.db, h.d, h.c.table, h.c.pooler)
		if err != nil {
			return failed(err)
		}
		src.AllDue = true // for skipped firings
		h.src = src
	}
	local := time.Now()
	rows, err := h.src.List(ctx, holds.All())
	if err != nil {
		return failed(err)
	}
	adv, notes, err := holds.AdvisoryLocks(ctx, h.db, h.d, h.c.namespace, nil)
	if err != nil {
		return failed(err)
	}
	rows = append(rows, adv...)
	s.Notes = notes
	waiting := 0
	for _, r := range adv {
		if strings.HasPrefix(r.State, "waiting") {
			waiting++
		}
	}
	caps := dialect.Of(h.d)
	if caps.LockWaiters && caps.Announces && !h.c.pooler {
		if s.Waiters, err = holds.PGWaiters(ctx, h.db); err != nil {
			return failed(err)
		}
		if s.Listening, err = holds.PGListeners(ctx, h.db, dialect.NotifyChannel(h.c.table)); err != nil {
			return failed(err)
		}
		waiting = len(s.Waiters) + s.Listening
	}
	// Waiters per key: PostgreSQL's queues in the rows, MariaDB's gate
	// waiters where performance_schema shows them.
	var waits []holds.Wait
	switch {
	case caps.QueuedWaiters:
		if waits, err = h.src.Waits(ctx); err != nil {
			return failed(err)
		}
	case caps.Gates:
		waits = holds.GateWaits(rows, adv)
	}
	s.WaitsKnown = waitsKnown(h.d, len(notes) > 0)
	audit, err := holds.Audit(ctx, h.db, h.c.table)
	if err != nil {
		return failed(err)
	}
	if n := len(audit); n > h.c.auditN {
		audit = audit[n-h.c.auditN:]
	}
	for i, j := 0, len(audit)-1; i < j; i, j = i+1, j-1 {
		audit[i], audit[j] = audit[j], audit[i] // newest first
	}
	s.Audit = audit
	s.rows = rows
	s.At = h.hist.add(local, rows, waiting, waits)
	h.hist.schedule(s.At, h.src.Due, rows)
	s.Skipped = h.hist.skipped()
	s.WaitingNow = waiting
	s.Groups = groupsOf(rows, s.Force)
	s.Jobs = h.hist.runs(rows)
	s.Charts = h.hist.charts(s.At)
	s.Waits = h.hist.waitChart(s.At)
	s.KeyWaits = h.hist.waitCharts(s.At)
	return s
}

// waitsKnown says what the page can know of the waiters of a key on d;
// psOff: performance_schema, which lists the gates' waiters, is off.
func waitsKnown(d sqllock.Dialect, psOff bool) string {
	c := dialect.Of(d)
	switch {
	case c.QueuedWaiters:
		return c.Name + ": each held row's queue, the Lockers refused that wait for it (one per Locker, however many of its calls wait); a waiter that could not queue (behind a pooler) counts as one."
	case c.Gates && !psOff:
		return c.Name + ": the sessions waiting on a key's gate (GET_LOCK), as performance_schema shows them."
	case c.Gates:
		return c.Name + ": a waiter waits on a gate (GET_LOCK) that only performance_schema shows, and it is off on this server: no waits per key."
	}
	return c.Name + ": waiters poll the lock table and leave no trace in the database: no waits per key."
}

type pageData struct {
	Title   string
	Every   time.Duration
	EveryMS int64
	Force   bool
	Token   bool // a force release asks for the token
	Snap    *snapshot
}

func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	s := h.read(r.Context())
	h.render(w, "page", pageData{Title: h.c.title, Every: h.c.every, EveryMS: h.c.every.Milliseconds(), Force: s.Force,
		Token: h.c.force != "", Snap: s})
}

func (h *handler) fragment(w http.ResponseWriter, r *http.Request) {
	h.render(w, "live", h.read(r.Context()))
}

// render renders whole or not at all: a half page would be swapped in.
func (h *handler) render(w http.ResponseWriter, name string, data any) {
	var b bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

type releaseData struct {
	Row     *holds.Row
	Part    string
	Message string
	Refused bool
	Token   bool // the form asks for the force token
}

// find returns the row of table and rowKey held under token, in a fresh
// listing.
func (h *handler) find(ctx context.Context, table, rowKey string, token int64) (*holds.Row, error) {
	h.mu.Lock()
	h.lastAt = time.Time{} // read again: the release needs the rows of now
	h.mu.Unlock()
	s := h.read(ctx)
	if s.Err != "" {
		return nil, errors.New(s.Err)
	}
	for _, r := range s.rows {
		if r.Table == table && r.RowKey == rowKey && r.Table != "" && (token == 0 || r.Token == token) {
			return &r, nil
		}
	}
	return nil, nil
}

func (h *handler) releaseForm(w http.ResponseWriter, r *http.Request) {
	if !h.c.forceOn() {
		h.refuse(w, http.StatusForbidden, nil, "This page is read only: force release is off (sqllock web --allow-force turns it on).")
		return
	}
	q := r.URL.Query()
	token, _ := strconv.ParseInt(q.Get("token"), 10, 64)
	row, err := h.find(r.Context(), q.Get("table"), q.Get("row"), token)
	switch {
	case err != nil:
		h.refuse(w, http.StatusInternalServerError, nil, err.Error())
	case row == nil:
		h.refuse(w, http.StatusNotFound, nil, "That hold is no longer held (or changed hands): nothing to release.")
	default:
		h.render(w, "release", releaseData{Row: row, Part: row.Part(), Token: h.c.force != ""})
	}
}

func (h *handler) release(w http.ResponseWriter, r *http.Request) {
	if !h.c.forceOn() {
		h.refuse(w, http.StatusForbidden, nil, "This page is read only: force release is off (sqllock web --allow-force turns it on).")
		return
	}
	if err := r.ParseForm(); err != nil {
		h.refuse(w, http.StatusBadRequest, nil, err.Error())
		return
	}
	token, _ := strconv.ParseInt(r.PostForm.Get("token"), 10, 64)
	row, err := h.find(r.Context(), r.PostForm.Get("table"), r.PostForm.Get("row"), token)
	switch {
	case err != nil:
		h.refuse(w, http.StatusInternalServerError, nil, err.Error())
		return
	case row == nil:
		h.refuse(w, http.StatusConflict, nil, "That hold is no longer held, or changed hands since it was shown: nothing released.")
		return
	}
	if h.c.force != "" && subtle.ConstantTimeCompare([]byte(r.PostForm.Get("auth")), []byte(h.c.force)) != 1 {
		h.refuse(w, http.StatusForbidden, row, "Refused: the force token is missing or wrong. Nothing was released.")
		return
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		h.refuse(w, http.StatusBadRequest, row, "A reason is needed, for the audit trail. Nothing was released.")
		return
	}
	ok, err := h.src.ForceRelease(r.Context(), *row, tablelock.Reason(reason))
	switch {
	case errors.Is(err, sqllock.ErrNotHeld), err == nil && !ok:
		h.refuse(w, http.StatusConflict, nil, "That hold changed hands or was released before the force release reached it: nothing released.")
		return
	case err != nil:
		h.refuse(w, http.StatusInternalServerError, nil, err.Error())
		return
	}
	h.mu.Lock()
	h.lastAt = time.Time{}
	h.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_ = h.tmpl.ExecuteTemplate(w, "release", releaseData{Message: fmt.Sprintf("Released %s %q (token %d); recorded in the audit trail.", row.Kind, row.Key, row.Token)})
}

func (h *handler) refuse(w http.ResponseWriter, code int, row *holds.Row, msg string) {
	d := releaseData{Row: row, Message: msg, Refused: true, Token: h.c.force != ""}
	if row != nil {
		d.Part = row.Part()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_ = h.tmpl.ExecuteTemplate(w, "release", d)
}

// releaseLink is the address of row's release form, relative to the page.
func releaseLink(r holds.Row) string {
	v := url.Values{"table": {r.Table}, "row": {r.RowKey}, "token": {strconv.FormatInt(r.Token, 10)}}
	return "release?" + v.Encode()
}
