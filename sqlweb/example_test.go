package sqlweb_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/sqlweb"
	"github.com/sqllock/sqllock/tablelock"
)

// Mount the page of every hold on an application's own mux, under
// /locks/, here on the embedded SQLite default.
func ExampleHandler() {
	dir, _ := os.MkdirTemp("", "sqlweb-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := migrations.Up(ctx, db, sqllock.SQLite); err != nil {
		log.Fatal(err)
	}
	locker, err := tablelock.New(db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	lease, err := locker.Acquire(sqllock.WithOwner(ctx, "billing-7"), "invoices/2026-12")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	mux := http.NewServeMux()
	mux.Handle("/locks/", http.StripPrefix("/locks", sqlweb.Handler(db, sqllock.SQLite)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/locks/")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	fmt.Println(resp.Status)
	fmt.Println(strings.Contains(page, "invoices/2026-12"), strings.Contains(page, "billing-7"))
	fmt.Println(resp.Header.Get("Content-Security-Policy") == sqlweb.CSP)
	// Output:
	// 200 OK
	// true true
	// true
}
