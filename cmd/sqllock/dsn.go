package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
)

// target is a database the command talks to.
type target struct {
	dialect  sqllock.Dialect
	driver   string // database/sql driver name
	dsn      string // in the driver's form
	raw      string // as given to --dsn; "" for the embedded database
	display  string // for people: no password
	embedded bool   // the default SQLite file, migrated on first use
	// pinned: the DSN named the path (sqllock_dialect), which the
	// server's flavour then does not override.
	pinned bool
	// singleWriter: the DSN declared lock traffic goes to one Galera node
	// (sqllock_single_writer=1).
	singleWriter bool
	// pooler: the DSN declared a transaction-pooling proxy in front of
	// PostgreSQL (sqllock_pooler=transaction): every Locker the command
	// builds runs WithTransactionPooler.
	pooler  bool
	path    string   // SQLite file
	secrets []string // the passwords in raw, in every form found: scrub never prints them
}

// parseDSN maps a --dsn value to a driver and its DSN, without connecting.
//
// Nothing it returns shows a password: the display string is built from
// the parsed user, host and database, and an error describes the DSN with
// redact's mask over it. An error's details come from parsing the masked
// DSN, never the real one: a parser's message may quote any part of its
// input, and a DSN that fails to parse is one whose password's bounds are
// uncertain.
func parseDSN(raw string) (target, error) {
	form := formOf(raw)
	t, err := form.parse(raw)
	if err == nil {
		t.secrets = append(t.secrets, secretsOf(raw)...)
		return t, nil
	}
	masked := redact(raw)
	why := err.Error()
	if masked != raw { // else there is nothing to hide
		if _, merr := form.parse(masked); merr != nil {
			why = merr.Error()
		} else {
			why = "its user name or password cannot be read: " + form.hint
		}
	}
	if raw == "" {
		return target{}, fail(exitBadDSN, "bad --dsn: %s", why)
	}
	return target{}, fail(exitBadDSN, "bad --dsn %s: %s", masked, why)
}

// dsnForm is one way of writing a DSN: how to parse it, and how its user
// name and password are written.
type dsnForm struct {
	parse func(string) (target, error)
	hint  string
}

const urlHint = "in a URL, percent-encode the characters : / ? # [ ] @ % and spaces in them (@ is %40, # is %23)"

var (
	keywordForm = dsnForm{postgresTarget, `quote a password that holds spaces or quotes: password='it\'s secret'`}
	driverForm  = dsnForm{mysqlDriverDSN, "the password ends at the last @ before the address"}
	unknownForm = dsnForm{func(string) (target, error) {
		return target{}, errors.New("want postgres://..., mysql://..., sqlite://path, or a driver's own DSN (host=... dbname=..., or user:pass@tcp(host:port)/db)")
	}, ""}
)

// formOf tells the forms apart without parsing: a URL by its scheme, a
// keyword DSN by its first "key=", the go-sql-driver form
// ([user[:pw]@][net(addr)]/db) by its slash or address.
func formOf(raw string) dsnForm {
	scheme, isURL := urlScheme(raw)
	switch {
	case !isURL && keywordDSN.MatchString(raw):
		return keywordForm
	case !isURL && (strings.Contains(raw, "/") || strings.Contains(raw, "tcp(") || strings.Contains(raw, "unix(")):
		return driverForm
	case !isURL:
		return unknownForm
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return dsnForm{func(s string) (target, error) {
			if err := checkAuthority(s, scheme); err != nil {
				return target{}, err
			}
			// pgx knows the URL form by its lower-case scheme.
			return postgresTarget(strings.ToLower(scheme) + s[len(scheme):])
		}, urlHint}
	case "mysql", "mariadb":
		return dsnForm{func(s string) (target, error) { return mysqlURL(s, scheme) }, urlHint}
	case "sqlite", "sqlite3", "file":
		return dsnForm{func(s string) (target, error) { return sqliteURL(s[len(scheme)+len("://"):]) },
			"sqlite:// takes a file path, not user:password@host"}
	}
	return dsnForm{func(string) (target, error) {
		return target{}, fmt.Errorf("unknown scheme %q: want postgres, mysql or sqlite", scheme)
	}, urlHint}
}

// keywordDSN is the start of a PostgreSQL keyword/value DSN: "host=...".
var keywordDSN = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)

// urlScheme returns the scheme of a URL-shaped DSN, "scheme://...".
func urlScheme(raw string) (string, bool) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return "", false
	}
	for i, c := range scheme {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", false
		}
	}
	return scheme, true
}

func mysqlDriverDSN(raw string) (target, error) {
	cfg, err := mysql.ParseDSN(raw)
	if err != nil {
		return target{}, err
	}
	return mysqlTarget(raw, cfg)
}

// checkAuthority refuses a URL whose user info may have leaked out of its
// authority: an '@' after the host (the password held a raw '/', '?' or
// '#', which ended the authority early), a '#', which no DSN uses, or a
// raw '@' in the user info. Such a URL parses, but with part of the
// password in the host, path or query.
func checkAuthority(raw, scheme string) error {
	rest := raw[len(scheme)+len("://"):]
	if strings.Contains(rest, "#") {
		return errors.New("a '#' must be percent-encoded (%23)")
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	if strings.LastIndex(rest, "@") > end {
		return errors.New("an '@' after the host: percent-encode '/', '?' and '@' in the user name and password")
	}
	// net/url splits the user info at the last '@', pgx at the first: with
	// two, pgx would take the rest of the password for the host.
	if strings.Count(rest[:end], "@") > 1 {
		return errors.New("two '@' before the host: percent-encode '@' in the user name and password (%40)")
	}
	return nil
}

func postgresTarget(dsn string) (target, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return target{}, err
	}
	t := target{dialect: sqllock.Postgres, driver: "pgx", dsn: dsn, raw: dsn,
		display: fmt.Sprintf("postgres %s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)}
	t.secrets = addSecret(t.secrets, cfg.Password)
	// pgx would send sqllock's own parameter to the server as a setting.
	if v, ok := cfg.RuntimeParams[poolerParam]; ok {
		if v != "transaction" {
			return target{}, fmt.Errorf("%s=%s: want transaction (PgBouncer's pool_mode = transaction)", poolerParam, v)
		}
		t.pooler = true
		t.dsn = withoutParam(dsn, poolerParam)
		if _, set := cfg.RuntimeParams["default_query_exec_mode"]; !set && !strings.Contains(dsn, "default_query_exec_mode") {
			// Statements prepared on one turn of a server session are
			// missing on the next before PgBouncer 1.21.
			t.dsn = withParam(t.dsn, "default_query_exec_mode", "exec")
		}
	}
	return t, nil
}

// poolerParam declares a transaction-pooling proxy in a PostgreSQL DSN.
const poolerParam = "sqllock_pooler"

// withoutParam removes key=value from a PostgreSQL DSN, in the URL's query
// or among the keyword form's pairs.
func withoutParam(dsn, key string) string {
	if _, isURL := urlScheme(dsn); isURL {
		re := regexp.MustCompile(`([?&])` + regexp.QuoteMeta(key) + `=[^&#]*(&|$)`)
		out := re.ReplaceAllStringFunc(dsn, func(m string) string {
			if strings.HasPrefix(m, "?") && strings.HasSuffix(m, "&") {
				return "?"
			}
			if strings.HasSuffix(m, "&") {
				return "&"
			}
			return ""
		})
		return out
	}
	re := regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(key) + `\s*=\s*('(\\.|[^'])*'|\S+)`)
	return strings.TrimSpace(re.ReplaceAllString(dsn, ""))
}

// withParam adds key=value to a PostgreSQL DSN.
func withParam(dsn, key, value string) string {
	if _, isURL := urlScheme(dsn); isURL {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
			if strings.HasSuffix(dsn, "?") || strings.HasSuffix(dsn, "&") {
				sep = ""
			}
		}
		return dsn + sep + key + "=" + value
	}
	return dsn + " " + key + "=" + value
}

func mysqlTarget(raw string, cfg *mysql.Config) (target, error) {
	cfg.ParseTime = true // goose scans its timestamps into time.Time
	t := target{dialect: sqllock.MariaDB, driver: "mysql", raw: raw,
		display: fmt.Sprintf("mysql %s@%s/%s", cfg.User, cfg.Addr, cfg.DBName)}
	t.secrets = addSecret(t.secrets, cfg.Passwd)
	// sqllock's own parameters, taken out: the driver would send any other
	// as a SET of a system variable.
	if v, ok := cfg.Params["sqllock_dialect"]; ok {
		delete(cfg.Params, "sqllock_dialect")
		switch strings.ToLower(v) {
		case "mysql", "mysql8", "mysql-common", "common":
			t.dialect = sqllock.MySQL
		case "mariadb":
			t.dialect = sqllock.MariaDB
		default:
			return target{}, fmt.Errorf("sqllock_dialect=%s: want mariadb or mysql", v)
		}
		t.pinned = true
	}
	if _, ok := cfg.Params[poolerParam]; ok {
		return target{}, fmt.Errorf("%s: a transaction pooler is a PostgreSQL proxy (PgBouncer); not for MySQL", poolerParam)
	}
	if v, ok := cfg.Params["sqllock_single_writer"]; ok {
		delete(cfg.Params, "sqllock_single_writer")
		if v != "1" && v != "true" {
			return target{}, fmt.Errorf("sqllock_single_writer=%s: want 1", v)
		}
		t.singleWriter = true
	}
	t.dsn = cfg.FormatDSN()
	return t, nil
}

// mysqlURL translates mysql://user:pass@host:port/db?params into the
// go-sql-driver's config. The URL is taken apart by net/url, and each part
// goes to its field: the driver's own DSN is never searched for a '?' or
// an '@', which an encoded password may hold. The parameters are read by
// the driver's own parser, so every one it knows is honoured.
func mysqlURL(raw, scheme string) (target, error) {
	if err := checkAuthority(raw, scheme); err != nil {
		return target{}, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, err
	}
	host := u.Host
	if host == "" {
		return target{}, errors.New("mysql:// needs a host, as in mysql://user:pass@127.0.0.1:3306/db")
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "3306")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		return target{}, errors.New("mysql:// needs a database name, as in mysql://user@host:3306/db")
	}
	cfg, err := mysql.ParseDSN("tcp(" + host + ")/?" + u.RawQuery)
	if err != nil {
		return target{}, err
	}
	cfg.DBName = db
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	return mysqlTarget(raw, cfg)
}

// sqliteURL reads the path of sqlite://path as written: the command builds
// the file: URI itself, escaping what SQLite would read as URI syntax.
func sqliteURL(path string) (target, error) {
	switch {
	case path == "":
		return target{}, errors.New("sqlite:// needs a file path, as in sqlite://locks.db or sqlite:///var/lib/app/locks.db")
	case strings.Contains(path, "?"):
		return target{}, errors.New("sqlite:// takes a file path and no parameters (the command sets its own); a '?' in the file name is not supported here")
	}
	if at := strings.LastIndex(path, "@"); at >= 0 && strings.Contains(path[:at], ":") {
		return target{}, errors.New("sqlite:// takes a file path, not user:password@host")
	}
	t := sqliteTarget(path, false)
	t.raw = "sqlite://" + path
	return t, nil
}

// redact masks the secrets of a DSN without parsing it, so that a DSN no
// parser accepts is masked as well as one they all do. Masked are:
//
//   - everything from the start, or from after "scheme://", to the last '@':
//     the user and password of a URL or a go-sql-driver DSN. The last '@'
//     anywhere, not only in the authority: a raw '/', '?' or '#' in a
//     password ends a URL's authority early, and a driver DSN's password
//     may hold anything but an '@' followed by the address.
//   - the value of every key ending in "password" (password, sslpassword) in
//     a keyword DSN, to the end of its quotes or the next space; in a URL's
//     query (the key percent-decoded, as drivers read it), to the end.
//
// Masking too much only shortens an error message; masking too little
// prints a password.
func redact(dsn string) string {
	masked := make([]bool, len(dsn))
	mask := func(from, to int) {
		for i := from; i < to; i++ {
			masked[i] = true
		}
	}
	scheme, isURL := urlScheme(dsn)
	start := 0
	if isURL {
		start = len(scheme) + len("://")
	}
	if at := strings.LastIndex(dsn, "@"); at >= start {
		mask(start, at)
	}
	for _, m := range passwordKey.FindAllStringIndex(dsn, -1) {
		if isURL {
			mask(m[1], len(dsn))
		} else {
			mask(m[1], keywordValueEnd(dsn, m[1]))
		}
	}
	if q := strings.IndexByte(dsn, '?'); isURL && q >= 0 {
		for i := q + 1; i < len(dsn); {
			end := strings.IndexByte(dsn[i:], '&')
			if end < 0 {
				end = len(dsn)
			} else {
				end += i
			}
			key, _, hasValue := strings.Cut(dsn[i:end], "=")
			name := key
			if dk, err := url.QueryUnescape(key); err == nil {
				name = dk
			}
			if hasValue && strings.HasSuffix(strings.ToLower(name), "password") {
				mask(i+len(key)+1, len(dsn))
				break
			}
			i = end + 1
		}
	}
	var b strings.Builder
	for i := 0; i < len(dsn); i++ {
		if !masked[i] {
			b.WriteByte(dsn[i])
			continue
		}
		b.WriteString("xxxxx")
		for i+1 < len(dsn) && masked[i+1] {
			i++
		}
	}
	return b.String()
}

// passwordKey finds the start of a password's value: "password=",
// "sslpassword = ", in any case.
var passwordKey = regexp.MustCompile(`(?i)password\s*=\s*`)

// keywordValueEnd returns the end of the keyword DSN value starting at i:
// a quoted value ends at its closing quote, a bare one at a space; a
// backslash escapes the next character in both (libpq's rules).
func keywordValueEnd(s string, i int) int {
	quoted := i < len(s) && s[i] == '\''
	if quoted {
		i++
	}
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case quoted && c == '\'':
			return i + 1
		case !quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'):
			return i
		}
	}
	return len(s)
}

// addSecret adds pw to secrets as written and as URLs encode it.
func addSecret(secrets []string, pw string) []string {
	if len(pw) < minSecret {
		return secrets
	}
	return append(secrets, pw, url.PathEscape(pw), url.QueryEscape(pw))
}

// secretsOf returns the passwords in dsn as redact finds them, raw and
// percent-decoded, so that scrub can remove them from a driver's messages.
func secretsOf(dsn string) []string {
	var out []string
	add := func(s string) {
		out = addSecret(out, s)
		if d, err := url.PathUnescape(s); err == nil && d != s {
			out = addSecret(out, d)
		}
		if d, err := url.QueryUnescape(s); err == nil && d != s {
			out = addSecret(out, d)
		}
	}
	scheme, isURL := urlScheme(dsn)
	start := 0
	if isURL {
		start = len(scheme) + len("://")
	}
	if at := strings.LastIndex(dsn, "@"); at >= start {
		if _, pw, ok := strings.Cut(dsn[start:at], ":"); ok {
			add(pw)
		}
	}
	for _, m := range passwordKey.FindAllStringIndex(dsn, -1) {
		v := dsn[m[1]:keywordValueEnd(dsn, m[1])]
		if isURL {
			v, _, _ = strings.Cut(dsn[m[1]:], "&")
		}
		add(strings.Trim(v, "'"))
	}
	return out
}

// minSecret is the shortest password scrub removes: a shorter one matches
// ordinary words ("pw" in every "pwd") and would make a message unreadable
// while hiding nothing.
const minSecret = 4

// scrub removes t's passwords from err's message, whatever produced it: a
// driver that quotes its configuration, a server that echoes a parameter.
// It keeps err's exit code.
func (t target) scrub(err error) error {
	if err == nil || len(t.secrets) == 0 {
		return err
	}
	msg := err.Error()
	clean := msg
	for _, s := range t.secrets {
		clean = strings.ReplaceAll(clean, s, "xxxxx")
	}
	if clean == msg {
		return err
	}
	code := exitFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	return &exitError{code: code, msg: clean}
}
