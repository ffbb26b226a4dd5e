package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
)

// KillSpec describes a session-kill notice run: a holder's session is
// ended from the server while a contender of another Locker keeps trying
// for the key.
type KillSpec struct {
	Holder, Contender sqllock.Locker
	// Session returns the server session id that holds lease.
	Session func(t testing.TB, lease sqllock.Lease) int64
	// Kill ends session id from the server (pg_terminate_backend, KILL).
	Kill   func(t testing.TB, id int64)
	Rounds int
}

// KillResult is what a KillNotice run measured.
type KillResult struct {
	// Notice is, per round, the time from just before the kill statement
	// was sent to Do's context being cancelled: an upper bound of the
	// notice (it includes the kill's round trip).
	Notice []time.Duration
	// AfterReturn is, per round, the time from the kill statement's
	// return to Do's context being cancelled; negative when the holder was
	// told before the kill statement's answer came back.
	AfterReturn []time.Duration
	// ContenderFirst counts the rounds where the contender saw the key
	// granted before the holder's Done closed. It is counted, not
	// asserted: both are seen through the same process's scheduler, which
	// a loaded machine delays by more than the server's head start (see
	// package sessionwatch).
	ContenderFirst int
}

// KillNotice runs k.Rounds kills. Each round holds a fresh key with
// sqllock.Do, kills the holding session and asserts that the loss is
// reported (Done closed, Err matching sqllock.ErrLockLost, Do's context
// cancelled) within 20s, and counts the rounds where the contender, trying
// all along, was granted the key before Done closed. No timing is
// asserted: the machine may be loaded. A Locker whose periodic check runs
// less often than every 20s (an hour, say) fails here unless something
// else reports the kill.
func KillNotice(t *testing.T, k KillSpec) KillResult {
	t.Helper()
	var r KillResult
	for i := range k.Rounds {
		d, after, first := killRound(t, k, i)
		r.Notice = append(r.Notice, d)
		r.AfterReturn = append(r.AfterReturn, after)
		if first {
			r.ContenderFirst++
		}
		if t.Failed() {
			break
		}
	}
	return r
}

func killRound(t *testing.T, k KillSpec, i int) (notice, afterReturn time.Duration, contenderFirst bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := Key(t)
	held := make(chan sqllock.Lease, 1)
	noticed := make(chan time.Time, 1)
	doErr := make(chan error, 1)
	go func() {
		doErr <- sqllock.Do(ctx, k.Holder, key, func(ctx context.Context) error {
			l, _ := sqllock.LeaseFrom(ctx)
			held <- l
			<-ctx.Done()
			noticed <- time.Now()
			return ctx.Err()
		})
	}()
	var lease sqllock.Lease
	select {
	case lease = <-held:
	case err := <-doErr:
		t.Fatalf("round %d: Do: %v", i, err)
	}
	id := k.Session(t, lease)

	// The contender tries without pause from before the kill; when it wins
	// it records whether the holder had been told.
	type win struct {
		toldFirst bool
		err       error
	}
	won := make(chan win, 1)
	go func() {
		for {
			l, err := k.Contender.TryAcquire(ctx, key)
			if err == nil {
				told := false
				select {
				case <-lease.Done():
					told = true
				default:
				}
				won <- win{toldFirst: told, err: l.Release(ctx)}
				return
			}
			if !errors.Is(err, sqllock.ErrNotAcquired) || ctx.Err() != nil {
				won <- win{err: err}
				return
			}
		}
	}()
	start := time.Now()
	k.Kill(t, id)
	returned := time.Now()
	var at time.Time
	select {
	case at = <-noticed:
	case <-time.After(20 * time.Second):
		t.Fatalf("round %d: the kill of session %d was not reported within 20s", i, id)
	}
	select {
	case <-lease.Done():
	default:
		t.Errorf("round %d: Do's context ended but Done is open", i)
	}
	if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
		t.Errorf("round %d: Err after the kill = %v, want ErrLockLost", i, err)
	}
	if err := <-doErr; !errors.Is(err, sqllock.ErrLockLost) {
		t.Errorf("round %d: Do = %v, want ErrLockLost", i, err)
	}
	w := <-won
	switch {
	case w.err != nil:
		t.Errorf("round %d: contender: %v", i, w.err)
	}
	return at.Sub(start), at.Sub(returned), w.err == nil && !w.toldFirst
}

// Summary is r in one line, for a test's log.
func (r KillResult) Summary(what string) string {
	return fmt.Sprintf("%s: %d kills; kill sent -> Do's context cancelled p50 %v p99 %v max %v; "+
		"kill returned -> cancelled p50 %v p99 %v; contender granted before Done closed in %d (shared, loaded machine)",
		what, len(r.Notice), Percentile(r.Notice, 50), Percentile(r.Notice, 99), Percentile(r.Notice, 100),
		Percentile(r.AfterReturn, 50), Percentile(r.AfterReturn, 99), r.ContenderFirst)
}

// Percentile returns the p-th percentile (0..100) of ds, nearest rank.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
