package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

func TestMain(m *testing.M) { testdb.VerifyNoLeaks(m) }

// After a contended run, a scrape of /metrics finds the instruments with
// non-zero values, under their Prometheus names.
func TestScrapeAfterContention(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		mp, handler, err := newMeterProvider()
		if err != nil {
			t.Fatal(err)
		}
		defer mp.Shutdown(context.Background())
		srv := httptest.NewServer(handler)
		defer srv.Close()
		l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithMeterProvider(mp))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		held, refused, err := contend(ctx, l, 6, 1)
		if err != nil {
			t.Fatal(err)
		}
		if held == 0 || refused == 0 {
			t.Fatalf("%d holds, %d refusals: not a contended run", held, refused)
		}
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		page := string(body)
		sys := map[string]string{"postgres": "postgresql", "mariadb": "mysql", "mysql": "mysql", "sqlite": "sqlite"}[db.Dialect.String()]
		for _, c := range []struct {
			series string
			want   int64 // at least; -1: present, any value
		}{
			{`sqllock_acquire_duration_seconds_count{.*sqllock_outcome="acquired".*}`, held},
			{`sqllock_acquire_duration_seconds_count{.*sqllock_outcome="not_acquired".*}`, refused},
			{`sqllock_lease_held_duration_seconds_count{.*}`, held},
			{`sqllock_lease_active{.*}`, -1},
			{`sqllock_waiters{.*}`, -1},
		} {
			re := regexp.MustCompile(`(?m)^` + c.series + ` (\S+)$`)
			m := re.FindAllStringSubmatch(page, -1)
			if len(m) == 0 {
				t.Errorf("no %s in the scrape:\n%s", c.series, page)
				continue
			}
			var total float64
			for _, x := range m {
				if !regexp.MustCompile(`db_system="`+sys+`"`).MatchString(x[0]) || !regexp.MustCompile(`sqllock_strategy="tablelock"`).MatchString(x[0]) {
					t.Errorf("%s lacks the strategy or db.system label", x[0])
				}
				v, err := strconv.ParseFloat(x[1], 64)
				if err != nil {
					t.Fatal(err)
				}
				total += v
			}
			if c.want >= 0 && total < float64(c.want) {
				t.Errorf("%s = %v, want at least %d", c.series, total, c.want)
			}
			if c.want > 0 && total == 0 {
				t.Errorf("%s is zero after a contended run", c.series)
			}
		}
	})
}
