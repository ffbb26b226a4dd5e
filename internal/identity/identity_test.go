package identity

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sqllock/sqllock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestResolve(t *testing.T) {
	ctx := context.Background()
	a, freshA, err := Resolve(ctx)
	b, _, _ := Resolve(ctx)
	if err != nil || !freshA || a == b || len(a) != 32 {
		t.Fatalf("no owner in ctx: got %q and %q (fresh %v, %v); want two distinct random ids", a, b, freshA, err)
	}
	got, fresh, err := Resolve(sqllock.WithOwner(ctx, "worker-7"))
	if err != nil || fresh || got != "worker-7" {
		t.Fatalf("Resolve(WithOwner) = %q, %v, %v", got, fresh, err)
	}
	for _, bad := range []string{"", strings.Repeat("o", sqllock.MaxOwnerLen+1), "worker-\xff", "worker\x00-7"} {
		if _, _, err := Resolve(sqllock.WithOwner(ctx, bad)); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("owner %q: %v, want ErrInvalidOption", bad, err)
		}
	}
	// Two processes on one host never share an identity.
	if h := Host(); !strings.HasSuffix(h, "/"+strconv.Itoa(os.Getpid())) {
		t.Errorf("Host() = %q, want hostname/pid", h)
	}
}
