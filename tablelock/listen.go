package tablelock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock/internal/waitq"
)

// listenLinger keeps the listening connection open this long after the last
// waiter leaves, so bursts of contention do not pay a LISTEN each.
const listenLinger = 2 * time.Second

// errNoPgx: the *sql.DB is not backed by pgx, so notifications cannot be read.
var errNoPgx = errors.New("tablelock: LISTEN needs the pgx stdlib driver")

// listener owns one connection per Locker that LISTENs on the table's
// channel while any Acquire is waiting, and wakes the waiters of each
// notified key.
type listener struct {
	db      *sql.DB
	channel string
	w       *waitq.Queue
	log     *slog.Logger

	mu     sync.Mutex
	users  int
	ready  chan struct{} // closed once LISTEN is in place (or failed)
	err    error         // why the last start failed
	cancel context.CancelFunc
	exited chan struct{}
	linger *time.Timer
	closed bool
	broken bool // the driver cannot listen: stop trying

	beforeRelisten func() // tests: runs before each reconnection's LISTEN
}

func newListener(db *sql.DB, channel string, w *waitq.Queue, log *slog.Logger) *listener {
	return &listener{db: db, channel: channel, w: w, log: log}
}

// subscribe registers a waiter and returns once the channel is being
// listened to. An error means the waiter must fall back to backoff.
func (ln *listener) subscribe(ctx context.Context) error {
	ln.mu.Lock()
	if ln.closed || ln.broken {
		ln.mu.Unlock()
		return errNoPgx
	}
	ln.users++
	if ln.linger != nil {
		ln.linger.Stop()
		ln.linger = nil
	}
	if ln.cancel == nil {
		ln.start()
	}
	ready := ln.ready
	ln.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
		ln.unsubscribe()
		return ctx.Err()
	}
	ln.mu.Lock()
	err := ln.err
	ln.mu.Unlock()
	if err != nil {
		ln.unsubscribe()
	}
	return err
}

func (ln *listener) unsubscribe() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.users--
	if ln.users == 0 && ln.cancel != nil && ln.linger == nil {
		ln.linger = time.AfterFunc(listenLinger, func() {
			ln.mu.Lock()
			defer ln.mu.Unlock()
			if ln.users == 0 && ln.linger != nil {
				ln.linger = nil
				ln.stopLocked()
			}
		})
	}
}

// close stops listening and waits for the goroutine to exit.
func (ln *listener) close() {
	ln.mu.Lock()
	ln.closed = true
	if ln.linger != nil {
		ln.linger.Stop()
		ln.linger = nil
	}
	exited := ln.exited
	ln.stopLocked()
	ln.mu.Unlock()
	if exited != nil {
		<-exited
	}
}

func (ln *listener) stopLocked() {
	if ln.cancel != nil {
		ln.cancel()
		ln.cancel = nil
	}
}

// start launches the listening goroutine. ln.mu must be held.
func (ln *listener) start() {
	ctx, cancel := context.WithCancel(context.Background())
	ln.cancel = cancel
	ln.ready = make(chan struct{})
	ln.err = nil
	ln.exited = make(chan struct{})
	go ln.run(ctx, ln.ready, ln.exited)
}

func (ln *listener) run(ctx context.Context, ready, exited chan struct{}) {
	defer close(exited)
	first := true
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		if !first && ln.beforeRelisten != nil {
			ln.beforeRelisten()
		}
		err := ln.listenOnce(ctx, func() {
			if first {
				first = false
				close(ready)
			} else {
				// LISTEN is in place again. A release announced since the
				// wake-up below, before it was, went unheard: let every
				// waiter look again, or it sleeps until its holder's lease
				// would have expired.
				ln.w.SignalAll()
			}
			backoff = 10 * time.Millisecond
		})
		if ctx.Err() != nil {
			break
		}
		// Whatever was released before the connection failed may have gone
		// unheard: let every waiter look again now.
		ln.w.SignalAll()
		if errors.Is(err, errNoPgx) || first {
			ln.mu.Lock()
			ln.err = err
			if errors.Is(err, errNoPgx) {
				ln.broken = true
			}
			ln.cancel = nil
			ln.mu.Unlock()
			if first {
				close(ready)
			}
			return
		}
		ln.log.Info("tablelock: listener reconnecting", "channel", ln.channel, "error", err.Error())
		select {
		case <-time.After(backoff):
			backoff = min(2*backoff, time.Second)
		case <-ctx.Done():
		}
	}
	if first {
		ln.mu.Lock()
		ln.err = context.Canceled
		ln.mu.Unlock()
		close(ready)
	}
}

// listenOnce holds one connection, LISTENs, and forwards notifications
// until ctx ends or the connection fails. The connection is discarded
// afterwards rather than returned to the pool still listening.
func (ln *listener) listenOnce(ctx context.Context, onReady func()) error {
	conn, err := ln.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return errNoPgx
		}
		c := pc.Conn()
		if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{ln.channel}.Sanitize()); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		onReady()
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				return errors.Join(err, driver.ErrBadConn)
			}
			ln.w.Signal(n.Payload)
		}
	})
}
