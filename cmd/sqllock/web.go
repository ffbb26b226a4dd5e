package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/sqlweb"
	"github.com/sqllock/sqllock/tablelock"
)

// webTokenEnv names the variable that sets the force token of `sqllock
// web --allow-force`, instead of a random one printed at start.
const webTokenEnv = "SQLLOCK_WEB_TOKEN"

// webAuthEnv names the variable that puts the whole page behind HTTP basic
// auth, as user:password.
const webAuthEnv = "SQLLOCK_WEB_BASIC_AUTH"

func init() {
	commandUsage["web"] = "web [--addr 127.0.0.1:8080] [--allow-force] [--every 2s] [--dsn DSN]\n\nServes a live page of every hold (package sqlweb). It binds to loopback\nunless --addr says otherwise, and is read only unless --allow-force; then a\nforce release needs the token printed at start (or $" + webTokenEnv + ").\n$" + webAuthEnv + "=user:password puts the whole page behind HTTP basic\nauth; with it, --allow-force needs no token unless $" + webTokenEnv + " is set."
}

// cmdWeb serves the page of every hold until the context ends (Ctrl-C).
func cmdWeb(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags("web", e, &df)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (loopback by default: the page shows every key and holder)")
	allowForce := fs.Bool("allow-force", false, "offer a force release per hold, behind a token (printed at start, or $"+webTokenEnv+") or the basic auth of $"+webAuthEnv+", with a reason for the audit trail")
	every := fs.Duration("every", 2*time.Second, "how often the page reads the holds again")
	window := fs.Duration("window", 5*time.Minute, "how far back the charts and job runs go")
	table := fs.String("table", tablelock.DefaultTable, "tablelock table")
	namespace := fs.String("namespace", advisory.DefaultNamespace, "the advisory Lockers' namespace (advisory.WithNamespace)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fail(exitUsage, "usage: sqllock web [--addr 127.0.0.1:8080] [--allow-force] [--dsn DSN]")
	}
	if *every < 100*time.Millisecond || *window < *every {
		return fail(exitUsage, "web: --every must be at least 100ms and --window at least --every")
	}
	var user, password string
	if v := e.getenv(webAuthEnv); v != "" {
		var ok bool
		user, password, ok = strings.Cut(v, ":")
		if !ok || user == "" || password == "" {
			return fail(exitUsage, "web: $%s wants user:password, both not empty", webAuthEnv)
		}
	}
	token := ""
	if *allowForce {
		// Behind basic auth the credentials stand for the token, unless
		// one is set too.
		if token = e.getenv(webTokenEnv); token == "" && user == "" {
			b := make([]byte, 16)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			token = hex.EncodeToString(b)
		}
	}
	return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
		opts := []sqlweb.Option{sqlweb.WithTable(*table), sqlweb.WithNamespace(*namespace), sqlweb.WithRefresh(*every),
			sqlweb.WithWindow(*window), sqlweb.WithForce(token), sqlweb.WithTitle(t.display), sqlweb.WithBasicAuth(user, password)}
		if *allowForce && user != "" {
			opts = append(opts, sqlweb.WithForceByBasicAuth())
		}
		if t.pooler {
			opts = append(opts, sqlweb.WithTransactionPooler())
		}
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return fail(exitUsage, "web: %v", err)
		}
		srv := &http.Server{Handler: sqlweb.Handler(db, t.dialect, opts...), ReadHeaderTimeout: 10 * time.Second}
		url := "http://" + ln.Addr().String() + "/"
		mode := "read only"
		switch {
		case token != "":
			mode = "force release on"
		case *allowForce:
			mode = "force release behind the basic auth"
		}
		fmt.Fprintf(e.stdout, "serving the holds of %s at %s (%s; Ctrl-C to stop)\n", t.display, url, mode)
		if user != "" {
			// Never the password: the user alone says which it is.
			fmt.Fprintf(e.stdout, "basic auth: user %s, with the password of $%s\n", safe(user), webAuthEnv)
		}
		switch {
		case token != "" && e.getenv(webTokenEnv) != "":
			fmt.Fprintf(e.stdout, "force token: the value of $%s\n", webTokenEnv)
		case token != "":
			fmt.Fprintf(e.stdout, "force token: %s\n", token)
		}
		if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
			fmt.Fprintf(e.stderr, "sqllock: web: listening on %s, beyond loopback: whoever reaches it sees every key and holder\n", ln.Addr())
		}
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
}
