package locktest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// FencedWrites is the loop of a child process that holds key with token:
// it writes to the fence resource key every 20ms, never looking at its
// lease, so that only the fence can stop it, and prints REFUSED when the
// fence refuses a write.
func FencedWrites(t testing.TB, db *testdb.DB, key string, token int64) {
	f, err := fence.New(db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	for {
		err := f.Check(context.Background(), db.DB, key, token)
		switch {
		case errors.Is(err, sqllock.ErrStaleToken):
			fmt.Println("REFUSED")
			return
		case err != nil:
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PausedHolderFenced is the parent side: child (made by testdb.Child) says
// "HELD <token>" and then runs FencedWrites on key. The child is paused
// (SIGSTOP) and take grants key to this process (waiting out the child's
// TTL) and returns its token and release. The new token must be larger,
// its fenced write accepted, and the resumed child's write refused.
func PausedHolderFenced(t *testing.T, db *testdb.DB, child *exec.Cmd, key string, take func(context.Context) (int64, func(), error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, lines := testdb.Start(t, ctx, child)
	testdb.Pause(t, db, child)
	token, release, err := take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if token <= old {
		t.Fatalf("the new holder's token %d is not above the paused holder's %d", token, old)
	}
	f, err := fence.New(db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ctx, db.DB, key, token); err != nil {
		t.Fatalf("the new holder's fenced write: %v", err)
	}
	if err := child.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testdb.WaitLine(t, ctx, lines, "REFUSED")
}
