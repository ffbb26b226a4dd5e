// Command metrics serves sqllock's OpenTelemetry metrics to Prometheus
// while workers contend for a few keys, to see what a hot key looks like.
//
//	go run ./examples/metrics                       # SQLite file in the temp dir, 10s of contention
//	go run ./examples/metrics -for 0                # contend until Ctrl-C
//	go run ./examples/metrics -dialect postgres -dsn 'postgres://...'
//	curl -s localhost:9464/metrics | grep ^sqllock_
//
// The library records on the OpenTelemetry API only; this program is
// where the SDK and the Prometheus exporter come in: one MeterProvider,
// handed to the Locker with tablelock.WithMeterProvider (or installed
// globally with otel.SetMeterProvider, which every Locker uses by default).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	_ "modernc.org/sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/tablelock"
)

func main() {
	dialectName := flag.String("dialect", "sqlite", "postgres, mariadb, mysql or sqlite")
	dsn := flag.String("dsn", "", "the driver's DSN (default: a SQLite file in the temporary directory)")
	addr := flag.String("addr", "127.0.0.1:9464", "where to serve /metrics")
	workers := flag.Int("workers", 8, "goroutines contending")
	keys := flag.Int("keys", 2, "keys they contend for")
	dur := flag.Duration("for", 10*time.Second, "how long to contend (0: until Ctrl-C); /metrics is served until Ctrl-C either way")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	d, err := sqllock.ParseDialect(*dialectName)
	if err != nil {
		log.Fatal(err)
	}
	driver := map[sqllock.Dialect]string{sqllock.Postgres: "pgx", sqllock.MariaDB: "mysql", sqllock.MySQL: "mysql", sqllock.SQLite: "sqlite"}[d]
	if *dsn == "" {
		if d != sqllock.SQLite {
			log.Fatal("-dsn is needed for ", d)
		}
		*dsn = "file:" + filepath.Join(os.TempDir(), "sqllock-metrics.db") + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"
	}
	db, err := sql.Open(driver, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db, d); err != nil {
		log.Fatal(err)
	}

	mp, handler, err := newMeterProvider()
	if err != nil {
		log.Fatal(err)
	}
	defer mp.Shutdown(context.Background())
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	log.Printf("serving http://%s/metrics", ln.Addr())

	l, err := tablelock.New(db, d, tablelock.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	cctx := ctx
	if *dur > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	held, refused, err := contend(cctx, l, *workers, *keys)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%d holds, %d refusals; still serving /metrics, Ctrl-C to stop", held, refused)
	<-ctx.Done()
}

// newMeterProvider returns a MeterProvider whose metrics a Prometheus
// registry of its own serves through the returned handler.
func newMeterProvider() (*sdkmetric.MeterProvider, http.Handler, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)), mux, nil
}

// contend runs workers that take one of keys in turn until ctx ends: a
// TryAcquire first (a refusal shows contention), then a blocking Acquire,
// a short hold, and Release. It returns the holds and refusals.
func contend(ctx context.Context, l sqllock.Locker, workers, keys int) (held, refused int64, err error) {
	var nHeld, nRefused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				key := fmt.Sprintf("metrics-example/%d", rand.N(keys))
				lease, err := l.TryAcquire(ctx, key)
				if errors.Is(err, sqllock.ErrNotAcquired) && ctx.Err() == nil {
					nRefused.Add(1)
					lease, err = l.Acquire(ctx, key)
				}
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				nHeld.Add(1)
				time.Sleep(time.Duration(1+rand.N(5)) * time.Millisecond) // the work
				if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return nHeld.Load(), nRefused.Load(), errors.Join(slicesFrom(errs)...)
}

func slicesFrom(c <-chan error) []error {
	var out []error
	for err := range c {
		out = append(out, err)
	}
	return out
}
