package filefence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence/filefence"
)

func newFile(t *testing.T) *filefence.File {
	t.Helper()
	f, err := filefence.New(filepath.Join(t.TempDir(), "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// TestStaleTokenRefused: after a write under token 7, a write under 5 is
// refused by every method, with an error that names the file and both
// tokens, and the file keeps what it had; 7 again and 8 are accepted.
func TestStaleTokenRefused(t *testing.T) {
	ctx := context.Background()
	f := newFile(t)
	for _, tok := range []int64{5, 7} {
		if err := f.Append(ctx, tok, []byte(fmt.Sprintf("token=%d\n", tok))); err != nil {
			t.Fatalf("append %d: %v", tok, err)
		}
	}
	before := read(t, f.Path())
	for name, write := range map[string]func(int64) error{
		"Append":  func(tok int64) error { return f.Append(ctx, tok, []byte("stale\n")) },
		"Replace": func(tok int64) error { return f.Replace(ctx, tok, []byte("stale\n")) },
		"Claim":   func(tok int64) error { return f.Claim(ctx, tok) },
		"Write": func(tok int64) error {
			return f.Write(ctx, tok, func(*os.File) error { t.Errorf("Write ran fn under stale token %d", tok); return nil })
		},
	} {
		err := write(5)
		if !errors.Is(err, sqllock.ErrStaleToken) {
			t.Errorf("%s under token 5 after 7: %v, want ErrStaleToken", name, err)
			continue
		}
		for _, want := range []string{f.Path(), "token 5", "than 7"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not name %q", name, err, want)
			}
		}
	}
	if got := read(t, f.Path()); got != before {
		t.Errorf("stale writes changed the file: %q, want %q", got, before)
	}
	if err := f.Append(ctx, 7, []byte("token=7 again\n")); err != nil {
		t.Errorf("equal token refused: %v", err)
	}
	if err := f.Replace(ctx, 8, []byte("token=8\n")); err != nil {
		t.Fatalf("replace under 8: %v", err)
	}
	if got := read(t, f.Path()); got != "token=8\n" {
		t.Errorf("after Replace: %q", got)
	}
	if last, err := f.Last(ctx); err != nil || last != 8 {
		t.Errorf("Last = %d, %v; want 8", last, err)
	}
}

// TestBadInput: an empty path, a token below 1 and a nil function are
// refused with ErrInvalidOption, and nothing is created.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	if _, err := filefence.New(""); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Errorf("New(\"\"): %v, want ErrInvalidOption", err)
	}
	f := newFile(t)
	for name, err := range map[string]error{
		"token 0":  f.Append(ctx, 0, []byte("x")),
		"token -1": f.Claim(ctx, -1),
		"nil fn":   f.Write(ctx, 1, nil),
	} {
		if !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), f.Path()) {
			t.Errorf("%s: %v, want ErrInvalidOption naming %s", name, err, f.Path())
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(f.Path()))
	if len(entries) != 0 {
		t.Errorf("bad input created %d files", len(entries))
	}
	if last, err := f.Last(ctx); err != nil || last != 0 {
		t.Errorf("Last of a new file = %d, %v; want 0, nil", last, err)
	}
}

// TestEndedContextNotWritten: a context that ended (inside sqllock.Do, the
// loss of the lease) refuses the write with its cause, and neither the
// data nor the token is written.
func TestEndedContextNotWritten(t *testing.T) {
	f := newFile(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(sqllock.ErrLockLost)
	err := f.Append(ctx, 3, []byte("late\n"))
	if !errors.Is(err, sqllock.ErrLockLost) || !errors.Is(err, context.Canceled) {
		t.Errorf("append with an ended context: %v, want ErrLockLost and context.Canceled", err)
	}
	if _, err := os.Stat(f.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data file written: %v", err)
	}
	if last, err := f.Last(context.Background()); err != nil || last != 0 {
		t.Errorf("Last = %d, %v; want 0: an ended context recorded its token", last, err)
	}
}

// TestLockWaitEndsWithContext: a writer waiting for another's lock gives
// up when its context ends, and writes nothing.
func TestLockWaitEndsWithContext(t *testing.T) {
	f := newFile(t)
	inside, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		done <- f.Write(context.Background(), 1, func(data *os.File) error {
			close(inside)
			<-release
			_, err := data.WriteString("first\n")
			return err
		})
	}()
	<-inside
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := f.Append(ctx, 2, []byte("second\n"))
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("first writer: %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting writer: %v, want context.DeadlineExceeded", err)
	}
	if got := read(t, f.Path()); got != "first\n" {
		t.Errorf("file holds %q, want the first writer's line alone", got)
	}
}

// TestConcurrentWritersInTokenOrder: writers of one file, each under its
// own token, started in random order in one process (each write opens its
// own lock, so they exclude each other as processes do): the lines that
// land are in token order, and a refused write is always older than one
// that landed.
func TestConcurrentWritersInTokenOrder(t *testing.T) {
	f := newFile(t)
	ctx := context.Background()
	const writers, lines = 16, 10
	var mu sync.Mutex
	accepted, refused := 0, []int64{}
	var wg sync.WaitGroup
	for _, tok := range rand.Perm(writers) {
		wg.Add(1)
		go func(tok int64) {
			defer wg.Done()
			for i := range lines {
				err := f.Append(ctx, tok, []byte(fmt.Sprintf("%d %d\n", tok, i)))
				mu.Lock()
				switch {
				case err == nil:
					accepted++
				case errors.Is(err, sqllock.ErrStaleToken):
					refused = append(refused, tok)
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		}(int64(tok + 1))
	}
	wg.Wait()
	got := strings.Split(strings.TrimSpace(read(t, f.Path())), "\n")
	if len(got) != accepted {
		t.Errorf("%d lines in the file, %d appends accepted", len(got), accepted)
	}
	var prev int64
	for n, line := range got {
		tok, _ := strconv.ParseInt(strings.Fields(line)[0], 10, 64)
		if tok < prev {
			t.Fatalf("line %d %q: token %d after %d", n+1, line, tok, prev)
		}
		prev = tok
	}
	for _, tok := range refused {
		if tok >= prev {
			t.Errorf("token %d refused, but the last line's is %d", tok, prev)
		}
	}
	t.Logf("%d lines landed in token order, %d stale appends refused", accepted, len(refused))
}
