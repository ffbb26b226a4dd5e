package e2e_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// The failover test needs a primary with an asynchronous streaming standby
// (.ci/pg-ha up): envFailover names the script that kills the primary and
// promotes the standby ("kill-primary", "promote"), the others the DSNs its
// `env` prints. It runs in its own CI step, after the parallel test run.
const (
	envFailover   = "SQLLOCK_FAILOVER_CMD"
	envHADSN      = "SQLLOCK_HA_DSN"
	envHAStandby  = "SQLLOCK_HA_STANDBY_DSN"
	envFailWorker = "SQLLOCK_FAILOVER_WORKER" // set in the holder processes: "<table> <run>"
)

var failoverStrategies = []string{"tablelock", "advisory", "rowlock"}

// TestRequireSyncReplica: with sqllock.require_sync_replica on, a primary
// whose commits wait for its synchronous standby hands out locks, and
// refuses them to a session that commits without waiting (tablelock's
// WithAsyncCommit). Before TestFailover (source order): it needs the pair
// healthy, and puts the primary back to asynchronous replication.
func TestRequireSyncReplica(t *testing.T) {
	ctx, ha := haPrimary(t)
	setup := []string{
		`ALTER SYSTEM SET synchronous_standby_names = '*'`,
		`SELECT pg_reload_conf()`,
		`ALTER DATABASE test SET sqllock.require_sync_replica = on`,
	}
	undo := []string{
		`ALTER DATABASE test RESET sqllock.require_sync_replica`,
		`ALTER SYSTEM RESET synchronous_standby_names`,
		`SELECT pg_reload_conf()`,
	}
	t.Cleanup(func() {
		for _, q := range undo {
			if _, err := ha.ExecContext(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	for _, q := range setup {
		if _, err := ha.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// New sessions see the database setting; wait for the standby to be
	// the synchronous one, so a commit does not hang.
	fresh := openPG(t, os.Getenv(envHADSN))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := fresh.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'`).Scan(&n)
		if err == nil && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no synchronous standby within 30s: %d, %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	key := "require-sync-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	l, err := tablelock.New(fresh, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("a primary with a synchronous standby refused the lock: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	async, err := tablelock.New(fresh, sqllock.Postgres, tablelock.WithAsyncCommit(true))
	if err != nil {
		t.Fatal(err)
	}
	defer async.Close()
	lease, err = async.TryAcquire(ctx, key)
	if err == nil {
		lease.Release(ctx)
		t.Fatal("WithAsyncCommit took the lock although sqllock.require_sync_replica is on")
	}
	if !strings.Contains(err.Error(), "synchronous_commit off") || !strings.Contains(err.Error(), key) {
		t.Fatalf("WithAsyncCommit: %v; want the refusal naming the key and synchronous_commit off", err)
	}
	t.Log(err)
}

// TestReleaseDoesNotWait: a tablelock release that keeps nothing commits
// without waiting for its WAL flush, while a hold-at-least release
// (jobguard's AtLeast) and every other commit still wait. Shown on the
// pair's primary told to wait for a synchronous standby that never
// answers (synchronous_standby_names names none): a commit that waits
// hangs, one that does not returns, and the key it freed is free.
// Before TestFailover (source order): it puts the primary back.
func TestReleaseDoesNotWait(t *testing.T) {
	ctx, ha := haPrimary(t)
	// The control's writes: a commit that wrote nothing never waits.
	if _, err := ha.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sqllock_test_commits (at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	l, err := tablelock.New(ha, sqllock.Postgres, tablelock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	guard, err := jobguard.New(ha, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer guard.Close()
	key := "release-no-wait-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	job, err := guard.TryAcquire(ctx, jobguard.Job{Name: key, AtMost: time.Minute, AtLeast: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	// Commits hang from here until lift empties the setting again, before
	// the Guard and the Locker close (defers run last in, first out).
	waiting := []chan error{}
	defer func() {
		for _, q := range []string{`ALTER SYSTEM RESET synchronous_standby_names`, `SELECT pg_reload_conf()`} {
			if _, err := ha.ExecContext(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
		for _, c := range waiting {
			select {
			case <-c:
			case <-time.After(30 * time.Second):
				t.Errorf("a commit still waits 30s after the standby requirement was lifted")
			}
		}
	}()
	for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = 'sqllock_nobody'`, `SELECT pg_reload_conf()`} {
		if _, err := ha.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Once a new session has the setting, the server has signalled every
	// other one, and each reads it before its next statement.
	fresh := openPG(t, os.Getenv(envHADSN))
	for {
		var v string
		if err := fresh.QueryRowContext(ctx, `SHOW synchronous_standby_names`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v == "sqllock_nobody" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("synchronous_standby_names still %q", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// returns runs f and reports whether it returned within d; if not, the
	// deferred lift waits for it.
	returns := func(d time.Duration, f func() error) (bool, error) {
		c := make(chan error, 1)
		go func() { c <- f() }()
		select {
		case err := <-c:
			return true, err
		case <-time.After(d):
			waiting = append(waiting, c)
			return false, nil
		}
	}
	// The control: a commit that waits does hang.
	if done, err := returns(2*time.Second, func() error {
		_, err := fresh.ExecContext(context.Background(), `INSERT INTO sqllock_test_commits VALUES (now())`)
		return err
	}); done {
		t.Fatalf("a commit returned (%v) without the standby it must wait for: the test shows nothing", err)
	}
	if done, err := returns(2*time.Second, func() error { return job.Release(context.Background()) }); done {
		t.Fatalf("a hold-at-least release returned (%v) without waiting for its flush: lost in a crash, the job could run again early", err)
	}
	start := time.Now()
	if done, err := returns(20*time.Second, func() error { return lease.Release(context.Background()) }); !done || err != nil {
		t.Fatalf("tablelock release: returned %v, err %v; want it back at once, not waiting for the flush", done, err)
	}
	var owner string
	if err := fresh.QueryRowContext(ctx, `SELECT owner FROM sqllock_locks WHERE lock_key = $1`, key).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if owner != "" {
		t.Fatalf("the released row still names owner %q", owner)
	}
	t.Logf("release returned in %v while a waiting commit hung", time.Since(start).Round(time.Millisecond))
}

// TestCrashRecoveryTokens: advisory's tokens on PostgreSQL are drawn from
// an unlogged sequence (migration 00021; on a server before 15, in commits
// that do not wait for their WAL flush), which a crash recovery resets;
// the recovery begins a new token era, and the first token after it is
// above every token before it. Shown on the
// pair's primary, crashed (-m immediate) mid-traffic and started again.
// Before TestFailover (source order): it leaves the pair healthy.
func TestCrashRecoveryTokens(t *testing.T) {
	ctx, ha := haPrimary(t)
	script := os.Getenv(envFailover)
	l, err := advisory.New(ha, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	// The loop has a context of its own, ended after the crash: an
	// Acquire under way then may wait for a server that is gone.
	loop, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	var last int64
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			lease, err := l.Acquire(loop, "crash-"+strconv.Itoa(i%4))
			if err != nil {
				done <- err
				return
			}
			last = max(last, lease.Token())
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = lease.Release(rctx)
			cancel()
			if err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(time.Second)
	if out, err := exec.Command(script, "kill-primary").CombinedOutput(); err != nil {
		t.Fatalf("kill-primary: %v\n%s", err, out)
	}
	stopLoop()
	t.Logf("the loop ended with %v", <-done)
	l.Close()
	if last == 0 {
		t.Fatal("no token drawn before the crash")
	}
	if out, err := exec.Command(script, "start-primary").CombinedOutput(); err != nil {
		t.Fatalf("start-primary: %v\n%s", err, out)
	}
	ha.Close()
	fresh := openPG(t, os.Getenv(envHADSN))
	l2, err := advisory.New(fresh, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	var lease sqllock.Lease
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		lease, err = l2.Acquire(actx, "crash-after")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lock from the primary a minute after its crash recovery: %v", err)
		}
	}
	defer lease.Release(context.Background())
	next := lease.Token()
	if next <= last || next>>40 != last>>40+1 || next>>52 != last>>52 {
		t.Fatalf("token %#x after the crash recovery, %#x the largest before it: want the next era of the timeline, above", next, last)
	}
	t.Logf("largest token before the crash %#x (era %#x), first after it %#x (era %#x)", last, last>>40, next, next>>40)
	// The standby streams again before TestFailover kills this primary.
	if out, err := exec.Command(script, "up").CombinedOutput(); err != nil {
		t.Fatalf("pg-ha up: %v\n%s", err, out)
	}
}

// TestFailover: holders in two other processes contend for one key per
// strategy (tablelock, advisory, rowlock) on the primary, reached through a
// multi-host DSN with target_session_attrs=read-write, and write to a
// resource on another server (the referee) through the fence. Mid-traffic
// the standby is cut off from the primary (so it lags, as an asynchronous
// standby does), the primary is killed (-m immediate) and the standby
// promoted; the holders reconnect to it by themselves. Then:
//   - no token was handed out twice (the promoted standby's sequence stands
//     below the old primary's: bare nextval reissues tokens);
//   - every token drawn after the promotion is above every token drawn
//     before it, so no fenced write under a stale token was accepted and
//     the new holders' writes are not refused;
//   - each key is usable again; the time from the kill is logged.
func TestFailover(t *testing.T) {
	if w := os.Getenv(envFailWorker); w != "" {
		failoverWorker(t, w)
		return
	}
	script := os.Getenv(envFailover)
	if script == "" {
		t.Skipf("%s is not set: the failover test runs in its own CI step", envFailover)
	}
	haDSN, standbyDSN := os.Getenv(envHADSN), os.Getenv(envHAStandby)
	if haDSN == "" || standbyDSN == "" {
		t.Fatalf("%s needs %s and %s (eval \"$(.ci/pg-ha env)\")", envFailover, envHADSN, envHAStandby)
	}
	ctx := context.Background()
	referee := testdb.Open(t, sqllock.Postgres)
	ha := openPG(t, haDSN)
	if err := migrations.Up(ctx, ha, sqllock.Postgres); err != nil {
		t.Fatal(err)
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	logTable := "failover_log_" + run
	if _, err := referee.ExecContext(ctx, `CREATE TABLE `+logTable+` (
		id bigserial PRIMARY KEY, strategy text NOT NULL, lease text NOT NULL, token bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { referee.ExecContext(context.Background(), `DROP TABLE `+logTable) })

	// Two holder processes: this test binary again, in worker mode.
	type event struct {
		strategy, lease string
		token           int64
		at              time.Time
	}
	var (
		mu     sync.Mutex
		events []event // leases taken
		writes []event // fenced writes accepted
		procs  []*exec.Cmd
		stdins []io.Closer
		readWG sync.WaitGroup
	)
	acquiredSince := func(since time.Time) (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range events {
			if e.at.After(since) {
				n++
			}
		}
		return n
	}
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFailover$", "-test.count=1")
		cmd.Env = append(os.Environ(), envFailWorker+"="+logTable+" "+run)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs, stdins = append(procs, cmd), append(stdins, in)
		readWG.Add(1)
		go func() {
			defer readWG.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				// "acquired|accepted <strategy> <lease> <token> <unix nanos>"
				f := strings.Fields(sc.Text())
				if len(f) != 5 {
					continue
				}
				tok, _ := strconv.ParseInt(f[3], 10, 64)
				ns, _ := strconv.ParseInt(f[4], 10, 64)
				e := event{f[1], f[2], tok, time.Unix(0, ns)}
				mu.Lock()
				switch f[0] {
				case "acquired":
					events = append(events, e)
				case "accepted":
					writes = append(writes, e)
				}
				mu.Unlock()
			}
		}()
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for _, in := range stdins {
			in.Close() // the workers stop at EOF
		}
		readWG.Wait()
		for _, p := range procs {
			if err := p.Wait(); err != nil {
				t.Errorf("holder process: %v", err)
			}
		}
	}
	defer stop()

	waitFor := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	start := time.Now()
	waitFor("traffic before the failover", time.Minute, func() bool { return acquiredSince(start) >= 30 })

	// The standby stops receiving WAL: everything drawn from here on is
	// on the primary only, as with a lagging asynchronous standby. The
	// sequence is WAL-logged 32 values ahead, so 64 draws are sure to leave
	// the standby's sequence behind the primary's.
	standby := openPG(t, standbyDSN)
	for _, q := range []string{`ALTER SYSTEM SET primary_conninfo = ''`, `SELECT pg_reload_conf()`} {
		if _, err := standby.ExecContext(ctx, q); err != nil {
			t.Fatalf("cutting off the standby: %v", err)
		}
	}
	waitFor("the standby's WAL receiver to stop", 30*time.Second, func() bool {
		var n int
		err := standby.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_wal_receiver`).Scan(&n)
		return err == nil && n == 0
	})
	standby.Close()
	detached := time.Now()
	waitFor("traffic while the standby lags", time.Minute, func() bool { return acquiredSince(detached) >= 64 })

	pgHA := func(action string) {
		t.Helper()
		out, err := exec.Command(script, action).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", script, action, err, out)
		}
	}
	killed := time.Now()
	pgHA("kill-primary")
	pgHA("promote")
	promoted := time.Now()
	t.Logf("primary killed; standby promoted %v later", promoted.Sub(killed).Round(time.Millisecond))

	// Each key is usable again once a new holder's fenced write is
	// accepted: a token below the fence's would be refused.
	usable := map[string]time.Duration{}
	waitFor("every strategy's key usable after the promotion", time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range writes {
			if _, ok := usable[e.strategy]; !ok && e.at.After(promoted) {
				usable[e.strategy] = e.at.Sub(killed)
			}
		}
		return len(usable) == len(failoverStrategies)
	})
	after := time.Now()
	waitFor("traffic after the promotion", time.Minute, func() bool { return acquiredSince(after) >= 30 })
	stop()

	for _, s := range failoverStrategies {
		t.Logf("%s: key usable again %v after the kill (the promotion took %v)", s,
			usable[s].Round(time.Millisecond), promoted.Sub(killed).Round(time.Millisecond))
	}

	// No token handed out twice, to any lease of any strategy: the others
	// share one sequence, and advisory's carry an era above every
	// timeline in their high bits. Per strategy, every token drawn after the promotion
	// is above every one drawn before the kill: advisory's tokens carry
	// the era (timeline << 12 | eras) where the others carry the
	// timeline, so they sort above the others' and are compared apart.
	owner := map[int64]string{}
	maxBefore, minAfter := map[string]int64{}, map[string]int64{}
	for _, e := range events {
		lease := e.strategy + "/" + e.lease
		if o, ok := owner[e.token]; ok && o != lease {
			t.Errorf("token %d handed out twice: %s and %s", e.token, o, lease)
		}
		owner[e.token] = lease
		if e.at.Before(killed) {
			maxBefore[e.strategy] = max(maxBefore[e.strategy], e.token)
		} else if m, ok := minAfter[e.strategy]; e.at.After(promoted) && (!ok || e.token < m) {
			minAfter[e.strategy] = e.token
		}
	}
	for _, s := range failoverStrategies {
		if minAfter[s] <= maxBefore[s] {
			t.Errorf("%s: token %d drawn after the promotion is not above %d, drawn before the kill", s, minAfter[s], maxBefore[s])
		}
		t.Logf("%s: largest token before the kill %d (%#x), smallest after the promotion %d (%#x)",
			s, maxBefore[s], maxBefore[s], minAfter[s], minAfter[s])
	}
	t.Logf("%d leases", len(events))

	// The referee's view: per key, the accepted writes in the order the
	// fence admitted them never go back in token, and each token is one
	// lease's.
	rows, err := referee.QueryContext(ctx, `SELECT strategy, lease, token FROM `+logTable+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := map[string]int64{}
	tokenLease := map[int64]string{}
	accepted := 0
	for rows.Next() {
		var s, lease string
		var tok int64
		if err := rows.Scan(&s, &lease, &tok); err != nil {
			t.Fatal(err)
		}
		accepted++
		if tok < last[s] {
			t.Errorf("%s: write under token %d accepted after one under %d", s, tok, last[s])
		}
		last[s] = tok
		if o, ok := tokenLease[tok]; ok && o != lease {
			t.Errorf("%s: token %d wrote for two leases, %s and %s: two holders", s, tok, o, lease)
		}
		tokenLease[tok] = lease
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d fenced writes accepted", accepted)
}

// haPrimary skips t outside the failover step, and otherwise returns a
// context of a minute and a pool on the pair's primary, migrated.
func haPrimary(t *testing.T) (context.Context, *sql.DB) {
	t.Helper()
	if os.Getenv(envFailWorker) != "" || os.Getenv(envFailover) == "" {
		t.Skipf("%s is not set: runs in the failover CI step", envFailover)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ha := openPG(t, os.Getenv(envHADSN))
	if err := migrations.Up(ctx, ha, sqllock.Postgres); err != nil {
		t.Fatal(err)
	}
	return ctx, ha
}

func openPG(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// failoverWorker is one holder process: per strategy, a loop that takes
// the strategy's key, prints the lease, writes to the referee twice under
// the fence (the second write may come after the lease is lost: the fence
// must judge it), and releases. It stops when stdin closes.
func failoverWorker(t *testing.T, arg string) {
	f := strings.Fields(arg)
	if len(f) != 2 {
		t.Fatalf("%s=%q", envFailWorker, arg)
	}
	logTable, run := f[0], f[1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	referee := testdb.Open(t, sqllock.Postgres)
	ha := openPG(t, os.Getenv(envHADSN))
	fc, err := fence.New(sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	lockers := map[string]sqllock.Locker{}
	tl, err := tablelock.New(ha, sqllock.Postgres, tablelock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	lockers["tablelock"] = tl
	al, err := advisory.New(ha, sqllock.Postgres, advisory.WithCheckInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	lockers["advisory"] = al
	rl, err := rowlock.New(ha, sqllock.Postgres, rowlock.WithCheckInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	lockers["rowlock"] = rl

	var out sync.Mutex
	var wg sync.WaitGroup
	pid := os.Getpid()
	for _, s := range failoverStrategies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "failover-" + run + "-" + s
			resource := "failover-" + run + "-" + s
			for n := 0; ctx.Err() == nil; n++ {
				actx, acancel := context.WithTimeout(ctx, 2*time.Second)
				lease, err := lockers[s].Acquire(actx, key)
				acancel()
				if err != nil {
					time.Sleep(20 * time.Millisecond) // the server is away, or the key held
					continue
				}
				id := fmt.Sprintf("%d-%d", pid, n)
				out.Lock()
				fmt.Printf("acquired %s %s %d %d\n", s, id, lease.Token(), time.Now().UnixNano())
				out.Unlock()
				for range 2 {
					err := refereeWrite(ctx, referee.DB, fc, logTable, resource, s, id, lease.Token())
					if err == nil {
						out.Lock()
						fmt.Printf("accepted %s %s %d %d\n", s, id, lease.Token(), time.Now().UnixNano())
						out.Unlock()
					}
					if err != nil && !errors.Is(err, sqllock.ErrStaleToken) && ctx.Err() == nil {
						t.Errorf("%s: fenced write: %v", s, err)
					}
					time.Sleep(5 * time.Millisecond)
				}
				rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
				lease.Release(rctx) // lost to the failover, or released: either way ended
				rcancel()
			}
		}()
	}
	wg.Wait()
}

// refereeWrite is the protected write: in one referee transaction, the
// fence check and the log row that stands for the work.
func refereeWrite(ctx context.Context, db *sql.DB, fc *fence.Fence, logTable, resource, strategy, lease string, token int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fc.Check(ctx, tx, resource, token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+logTable+` (strategy, lease, token) VALUES ($1, $2, $3)`, strategy, lease, token); err != nil {
		return err
	}
	return tx.Commit()
}
