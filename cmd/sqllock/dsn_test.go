package main

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
)

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		in      string
		dialect sqllock.Dialect
		dsn     string // driver DSN; "" skips the check
	}{
		{"postgres://u:p@db:5432/app?sslmode=disable", sqllock.Postgres, "postgres://u:p@db:5432/app?sslmode=disable"},
		{"postgresql://u@db/app", sqllock.Postgres, ""},
		{"host=db user=u dbname=app", sqllock.Postgres, "host=db user=u dbname=app"},
		{"mysql://root@127.0.0.1:3306/test", sqllock.MariaDB, "root@tcp(127.0.0.1:3306)/test?parseTime=true"},
		{"mysql://root@db/test", sqllock.MariaDB, "root@tcp(db:3306)/test?parseTime=true"},
		{"mysql://u:p%40ss@db:3307/app?timeout=5s", sqllock.MariaDB, "u:p@ss@tcp(db:3307)/app?parseTime=true&timeout=5s"},
		{"mariadb://u@[::1]:3306/app", sqllock.MariaDB, "u@tcp([::1]:3306)/app?parseTime=true"},
		{"root@tcp(127.0.0.1:3306)/test", sqllock.MariaDB, "root@tcp(127.0.0.1:3306)/test?parseTime=true"},
		{"sqlite://locks.db", sqllock.SQLite, sqliteDSN("locks.db")},
		{"sqlite:///var/lib/app/locks.db", sqllock.SQLite, sqliteDSN("/var/lib/app/locks.db")},
	} {
		got, err := parseDSN(tc.in)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tc.in, err)
			continue
		}
		if got.dialect != tc.dialect || (tc.dsn != "" && got.dsn != tc.dsn) {
			t.Errorf("parseDSN(%q) = %v %q, want %v %q", tc.in, got.dialect, got.dsn, tc.dialect, tc.dsn)
		}
		if strings.Contains(got.display, "p@ss") || strings.Contains(got.display, ":p@") {
			t.Errorf("parseDSN(%q).display = %q shows the password", tc.in, got.display)
		}
	}
	for _, in := range []string{
		"", "redis://localhost", "just-a-word", "mysql://db:3306", "mysql:///app", "sqlite://",
		"postgres://u@db:notaport/app", "root@tcp(127.0.0.1:3306)/test?unknownparam=%zz",
	} {
		_, err := parseDSN(in)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitBadDSN {
			t.Errorf("parseDSN(%q) = %v, want a bad-DSN error (exit %d)", in, err, exitBadDSN)
		}
	}
}

func FuzzParseDSN(f *testing.F) {
	f.Add("mysql://u:p@h:1/d?x=y")
	f.Add("postgres://u@h/d")
	f.Add("sqlite://a.db")
	for _, in := range hostileDSNs {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tg, err := parseDSN(in)
		if err == nil && !tg.dialect.Valid() {
			t.Fatalf("parseDSN(%q) accepted with no dialect", in)
		}
		if err != nil && !strings.Contains(err.Error(), redact(in)) {
			t.Fatalf("parseDSN(%q) = %v: the error does not show the DSN as redact masks it", in, err)
		}
	})
}

// secretMark is part of every password in the hostile DSNs below: it must
// never show in anything the command prints.
const secretMark = "SeCrEt"

// hostileDSNs carry a password (with secretMark in it) that a naive
// redaction or a string-searching parser shows: raw reserved characters in
// URL passwords, driver forms the command once did not recognise, keyword
// forms, query-string passwords, several hosts. All point at 127.0.0.1:1,
// where nothing listens, or fail to parse (user:pw@/db is 127.0.0.1:3306).
var hostileDSNs = []string{
	"mysql://app:p%" + secretMark + "@127.0.0.1:1/test",
	"mysql://app:p%zz" + secretMark + "@127.0.0.1:1/test",
	"mysql://app:p#" + secretMark + "@127.0.0.1:1/test",
	"mysql://app:1/x#" + secretMark + "@127.0.0.1:1/test",
	"mysql://app:p?" + secretMark + "&tls=true@127.0.0.1:1/test",
	"mysql://app:p/" + secretMark + "@127.0.0.1:1/test",
	"mysql://app:p@" + secretMark + "@127.0.0.1:1/test",
	"mysql://app:" + secretMark + "#x@127.0.0.1:1/test",
	"mysql://app:" + secretMark + "@127.0.0.1:port/test",
	"mariadb://app:p[" + secretMark + "]@127.0.0.1:1/test",
	"app:" + secretMark + "@/test?tls=bogus",
	"app:" + secretMark + "@/test?timeout=zz",
	"app:" + secretMark + "@tcp(127.0.0.1:1)/test?timeout=1s",
	"app:" + secretMark + "@tcp(127.0.0.1:1)/test?timeout=%zz",
	"app:p/x?timeout=" + secretMark + "@tcp(127.0.0.1:1)",
	"app:p)" + secretMark + "@tcp(127.0.0.1:1/test",
	"host=127.0.0.1 port=1 user=app password=" + secretMark + " dbname=test connect_timeout=2",
	"host=127.0.0.1 port=1 user=app password='a b " + secretMark + "' dbname=test connect_timeout=2",
	"host=127.0.0.1 port=1 user=app password='a\\' " + secretMark + "' dbname=test connect_timeout=2",
	"host=127.0.0.1 port=1 password=p@" + secretMark + " user=app dbname=test badword",
	"host=127.0.0.1 port=notaport user=app password=" + secretMark,
	"postgres://app:p%" + secretMark + "@127.0.0.1:1/test",
	"postgres://app:p#" + secretMark + "@127.0.0.1:1/test",
	"postgres://app:p?" + secretMark + "@127.0.0.1:1/test",
	"postgresql://app:p:" + secretMark + "@x@127.0.0.1:1/test",
	"postgres://app:" + secretMark + "@127.0.0.1:1,127.0.0.1:notaport/test",
	"postgres://app:" + secretMark + "@127.0.0.1:1,127.0.0.1:2/test?connect_timeout=2",
	"postgres://app@127.0.0.1:1/test?password=" + secretMark + "&connect_timeout=2",
	"postgres://app@127.0.0.1:1/test?password=%zz" + secretMark,
	"postgres://app@127.0.0.1:1/test?sslpassword=" + secretMark + "&sslmode=bogus",
	"redis://app:" + secretMark + "@127.0.0.1:1",
	"sqlite://app:" + secretMark + "@127.0.0.1:1",
}

// TestDSNNeverShowsPassword: neither the error nor the display string of
// any hostile DSN shows its password.
func TestDSNNeverShowsPassword(t *testing.T) {
	for _, in := range hostileDSNs {
		tg, err := parseDSN(in)
		out := tg.display
		if err != nil {
			out += " " + err.Error()
		}
		if strings.Contains(out, secretMark) {
			t.Errorf("parseDSN(%q) shows the password: %s", in, out)
		}
	}
}

// TestCommandNeverShowsPassword runs the command on each hostile DSN: it
// exits with a bad-DSN or unreachable code, and prints no password,
// whatever the stage (parsing, connecting) that failed.
func TestCommandNeverShowsPassword(t *testing.T) {
	for _, in := range hostileDSNs {
		r := sqllockCmd(t, "locks", "--dsn", in)
		if r.code != exitBadDSN {
			t.Errorf("--dsn %q: exit %d, want %d; stderr %s", in, r.code, exitBadDSN, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, secretMark) {
			t.Errorf("--dsn %q: the output shows the password:\n%s%s", in, r.stdout, r.stderr)
		}
	}
}

// TestMySQLURLParams: a mysql:// URL is read part by part (user info,
// path, query), so an encoded '?' or '&' in the password cannot move the
// query into the database name, and every parameter reaches the driver.
func TestMySQLURLParams(t *testing.T) {
	for _, tc := range []struct {
		in, passwd string
		check      func(*mysql.Config) string
	}{
		{"mysql://app:p%3Fx@db:3306/test?tls=true&timeout=5s", "p?x", func(c *mysql.Config) string {
			if c.TLSConfig != "true" || c.TLS == nil || c.Timeout != 5*time.Second {
				return fmt.Sprintf("tls %q (%v), timeout %v; want tls=true and 5s", c.TLSConfig, c.TLS != nil, c.Timeout)
			}
			return ""
		}},
		{"mysql://app:a%26tls%3Dfalse%3Fb@db/test?tls=skip-verify", "a&tls=false?b", func(c *mysql.Config) string {
			if c.TLSConfig != "skip-verify" {
				return fmt.Sprintf("tls %q, want skip-verify", c.TLSConfig)
			}
			return ""
		}},
		{"mysql://app:p%2F%40%23%25@db/test?loc=Europe%2FParis&sql_mode=%27ANSI%27&charset=utf8mb4&readTimeout=2s", "p/@#%", func(c *mysql.Config) string {
			if c.Loc == nil || c.Loc.String() != "Europe/Paris" || c.Params["sql_mode"] != "'ANSI'" || c.ReadTimeout != 2*time.Second {
				return fmt.Sprintf("loc %v, params %v, read timeout %v", c.Loc, c.Params, c.ReadTimeout)
			}
			return ""
		}},
	} {
		tg, err := parseDSN(tc.in)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tc.in, err)
			continue
		}
		cfg, err := mysql.ParseDSN(tg.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): driver DSN %q does not parse: %v", tc.in, tg.dsn, err)
			continue
		}
		if cfg.DBName != "test" || cfg.User != "app" || cfg.Passwd != tc.passwd || !cfg.ParseTime {
			t.Errorf("parseDSN(%q): database %q, user %q, password %q, parseTime %v; want test, app, %q, true",
				tc.in, cfg.DBName, cfg.User, cfg.Passwd, cfg.ParseTime, tc.passwd)
		}
		if msg := tc.check(cfg); msg != "" {
			t.Errorf("parseDSN(%q): %s", tc.in, msg)
		}
	}
}

// TestMySQLDriverForms: the go-sql-driver forms, with the default address
// (user:pw@/db) too, are MySQL DSNs; keyword forms stay PostgreSQL ones.
func TestMySQLDriverForms(t *testing.T) {
	for _, tc := range []struct {
		in           string
		dialect      sqllock.Dialect
		addr, dbName string
	}{
		{"app:pw@/test", sqllock.MariaDB, "127.0.0.1:3306", "test"},
		{"app:pw@/test?timeout=5s&tls=true", sqllock.MariaDB, "127.0.0.1:3306", "test"},
		{"app@/test", sqllock.MariaDB, "127.0.0.1:3306", "test"},
		{"/test", sqllock.MariaDB, "127.0.0.1:3306", "test"},
		{"app:p=w@/test?x=y", sqllock.MariaDB, "127.0.0.1:3306", "test"},
		{"app:pw@tcp(db:3307)/test", sqllock.MariaDB, "db:3307", "test"},
		{"app:pw@unix(/run/mysqld/mysqld.sock)/test", sqllock.MariaDB, "/run/mysqld/mysqld.sock", "test"},
		{"host=/var/run/postgresql dbname=app", sqllock.Postgres, "", ""},
		{"user=app password=a@b/c host=db", sqllock.Postgres, "", ""},
		{" dbname = app host=db", sqllock.Postgres, "", ""},
	} {
		tg, err := parseDSN(tc.in)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tc.in, err)
			continue
		}
		if tg.dialect != tc.dialect {
			t.Errorf("parseDSN(%q) is a %v DSN, want %v", tc.in, tg.dialect, tc.dialect)
			continue
		}
		if tc.dialect != sqllock.MariaDB {
			continue
		}
		cfg, err := mysql.ParseDSN(tg.dsn)
		if err != nil || cfg.Addr != tc.addr || cfg.DBName != tc.dbName || !cfg.ParseTime {
			t.Errorf("parseDSN(%q) = %q (%v); want address %s, database %s, parseTime", tc.in, tg.dsn, err, tc.addr, tc.dbName)
		}
	}
}

// TestSQLitePaths: '#', '%' and '?' in a file path are the file name's own
// characters, not parts of a file: URI, so two paths that differ only
// after one of them are two databases.
func TestSQLitePaths(t *testing.T) {
	dir := t.TempDir()
	names := []string{"team#1", "team#2", "pct%41", "pctA", "pct%2541", "q?1", "q?2", "sp ace"}
	for _, name := range names {
		path := filepath.Join(dir, name+".db")
		db, err := sql.Open("sqlite", sqliteDSN(path))
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Exec("CREATE TABLE marker (name TEXT)")
		if err == nil {
			_, err = db.Exec("INSERT INTO marker VALUES (?)", name)
		}
		db.Close()
		if err != nil {
			t.Errorf("%s: %v (a second path opened the same file?)", name, err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".db"); ok {
			got = append(got, n)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Errorf("database files %q, want one for each of %q", got, want)
	}

	// sqlite:// takes the path as written; a '?' would read as parameters,
	// which the command does not take.
	for in, path := range map[string]string{
		"sqlite://team#1.db":          "team#1.db",
		"sqlite:///srv/pct%41/x.db":   "/srv/pct%41/x.db",
		"file:///srv/a b/@work/x.db":  "/srv/a b/@work/x.db",
		"sqlite://./locks.db":         "./locks.db",
		"SQLITE:///var/lib/locks.db":  "/var/lib/locks.db",
		"sqlite3://relative/locks.db": "relative/locks.db",
	} {
		tg, err := parseDSN(in)
		if err != nil || tg.path != path || tg.dsn != sqliteDSN(path) {
			t.Errorf("parseDSN(%q) = path %q, DSN %q, %v; want path %q", in, tg.path, tg.dsn, err, path)
		}
	}
	for _, in := range []string{"sqlite://locks.db?mode=ro", "sqlite://a?b.db", "sqlite://u:pw@locks.db"} {
		if _, err := parseDSN(in); err == nil {
			t.Errorf("parseDSN(%q) accepted", in)
		}
	}
}

// dsnForms write a DSN with user, password pw and extra parameters in each
// form the command reads: URLs with the user info percent-encoded and raw
// (as a user might paste it), several hosts, a password in the query, the
// go-sql-driver forms and the keyword forms.
var dsnForms = []func(user, pw, params string) string{
	func(user, pw, params string) string {
		return "mysql://" + url.UserPassword(user, pw).String() + "@127.0.0.1:1/test?" + params
	},
	func(user, pw, params string) string {
		return "mysql://" + user + ":" + pw + "@127.0.0.1:1/test?" + params
	},
	func(user, pw, params string) string {
		return "postgres://" + url.UserPassword(user, pw).String() + "@127.0.0.1:1/test?" + params
	},
	func(user, pw, params string) string {
		return "postgresql://" + user + ":" + pw + "@127.0.0.1:1/test?" + params
	},
	func(user, pw, params string) string {
		return "postgres://" + user + ":" + pw + "@127.0.0.1:1,127.0.0.1:2/test?" + params
	},
	func(user, pw, params string) string {
		return "postgres://" + url.User(user).String() + "@127.0.0.1:1/test?" + params + "&password=" + url.QueryEscape(pw)
	},
	func(user, pw, params string) string {
		return "postgres://" + user + "@127.0.0.1:1/test?sslpassword=" + pw + "&" + params
	},
	func(user, pw, params string) string { return user + ":" + pw + "@tcp(127.0.0.1:1)/test?" + params },
	func(user, pw, params string) string { return user + ":" + pw + "@/test?" + params },
	func(user, pw, params string) string {
		return "host=127.0.0.1 port=1 user=" + keywordQuote(user) + " password=" + keywordQuote(pw) + " " + params
	},
	func(user, pw, params string) string {
		return "password=" + keywordQuote(pw) + " host=127.0.0.1 " + params
	},
}

// keywordQuote quotes a keyword DSN value as libpq reads it.
func keywordQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// FuzzDSNPassword builds DSNs in every form around a password that holds
// secretMark between arbitrary characters, and checks that nothing the
// command derives from them shows it: not the error, not the display
// string, not redact's mask, not a driver's message after scrub.
func FuzzDSNPassword(f *testing.F) {
	for i := range dsnForms {
		for _, pw := range [][2]string{
			{"", ""}, {"p%", ""}, {"p%zz", ""}, {"p#", "#x"}, {"p?", "&tls=true"}, {"p/", "/x"}, {"p@", "@x"},
			{"p:", ":x"}, {"a b ", " c"}, {"it's ", `\`}, {"p[", "]"}, {"1/x#", ""}, {"p)", "("}, {"p=", "=&"},
		} {
			f.Add(uint8(i), "app", pw[0], pw[1], "timeout=1s")
		}
	}
	f.Add(uint8(1), "app", "p/x?timeout=", "", "")
	f.Add(uint8(7), "app", "p/x?timeout=", "", "")
	f.Add(uint8(0), "a@b", "", "", "x=a@b")
	f.Fuzz(func(t *testing.T, form uint8, user, pre, post, params string) {
		pw := pre + secretMark + post
		if strings.Contains(strings.ToLower(user+params), strings.ToLower(secretMark)) {
			t.Skip("the mark outside the password")
		}
		raw := dsnForms[int(form)%len(dsnForms)](user, pw, params)
		tg, err := parseDSN(raw)
		out := []string{redact(raw)}
		if err != nil {
			out = append(out, err.Error())
		} else {
			// What the driver was given, quoted as a driver might.
			used := driverPassword(t, tg)
			out = append(out, tg.display,
				tg.scrub(fmt.Errorf("driver: %s / %s / %s", used, url.PathEscape(used), url.QueryEscape(used))).Error())
		}
		for _, o := range out {
			if strings.Contains(o, secretMark) {
				t.Fatalf("%q shows its password in %q", raw, o)
			}
		}
	})
}

// driverPassword is the password the driver reads from t's DSN.
func driverPassword(t *testing.T, tg target) string {
	t.Helper()
	switch tg.dialect {
	case sqllock.MariaDB:
		cfg, err := mysql.ParseDSN(tg.dsn)
		if err != nil {
			t.Fatalf("driver DSN %q: %v", tg.dsn, err)
		}
		return cfg.Passwd
	case sqllock.Postgres:
		cfg, err := pgx.ParseConfig(tg.dsn)
		if err != nil {
			t.Fatalf("driver DSN %q: %v", tg.dsn, err)
		}
		return cfg.Password
	}
	return ""
}
