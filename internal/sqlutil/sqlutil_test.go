package sqlutil

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestToTime(t *testing.T) {
	want := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	berlin := time.FixedZone("CEST", 2*3600)
	for _, tc := range []struct {
		name string
		in   any
		want time.Time
	}{
		{"time.Time in another zone", want.In(berlin), want},
		{"int64 microseconds", want.UnixMicro(), want},
		{"text", "2024-05-06 07:08:09.123456", want},
		{"bytes", []byte("2024-05-06 07:08:09.123456"), want},
		{"text without fraction", "2024-05-06 07:08:09", want.Truncate(time.Second)},
		{"unparsable text", "yesterday", time.Time{}},
		{"NULL", nil, time.Time{}},
		{"other type", 1.5, time.Time{}},
	} {
		got := ToTime(tc.in)
		if !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("%s: ToTime(%#v) = %v, want %v in UTC", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestExecScript(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "script.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	script := "CREATE TABLE a (x INTEGER);\n\nCREATE INDEX a_x ON a (x);\n  ;\n"
	if err := ExecScript(ctx, db, script); err != nil {
		t.Fatalf("ExecScript: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name IN ('a', 'a_x')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("the script made %d of its 2 objects", n)
	}

	// The first failure is returned, and what follows it is not run.
	if err := ExecScript(ctx, db, "CREATE TABLE a (x INTEGER); CREATE TABLE b (y INTEGER);"); err == nil {
		t.Fatal("ExecScript of a failing statement returned nil")
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'b'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("ExecScript ran on past a failed statement")
	}
}
