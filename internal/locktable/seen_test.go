package locktable

import (
	"fmt"
	"testing"
	"time"
)

// seenRows knows a key once seen, not once refused within quietFor nor
// once seenFor has passed, stays bounded however many keys pass through
// it, and still knows the key it saw last.
func TestSeenRows(t *testing.T) {
	var r seenRows
	if r.quiet("k") {
		t.Fatal("an empty memory knows k")
	}
	r.saw("k", false)
	if !r.quiet("k") || r.quiet("other") {
		t.Fatal("after saw(k): want k quiet, other unknown")
	}
	r.saw("k", true)
	if r.quiet("k") {
		t.Error("a key refused just now is quiet")
	}
	r.saw("k", false)
	if r.quiet("k") {
		t.Error("a take that won right after a refusal made the key quiet")
	}
	r.at["k"] = seenRow{seen: time.Now(), refused: time.Now().Add(-quietFor - time.Millisecond)}
	if !r.quiet("k") {
		t.Error("a key last refused longer than quietFor ago is not quiet")
	}
	r.at["k"] = seenRow{seen: time.Now().Add(-seenFor - time.Second)}
	if r.quiet("k") {
		t.Error("a key seen longer than seenFor ago is still known")
	}
	for i := range 3 * seenKeys {
		key := fmt.Sprint("key-", i)
		r.saw(key, false)
		if len(r.at) > seenKeys {
			t.Fatalf("after %d keys the memory holds %d, over %d", i+1, len(r.at), seenKeys)
		}
		if !r.quiet(key) {
			t.Fatalf("key %d, just seen, is not known", i)
		}
	}
}
