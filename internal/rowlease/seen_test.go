package rowlease

import (
	"fmt"
	"testing"
	"time"
)

// seenRows stays bounded however many keys pass through it, forgets a key
// after seenFor, and still knows the key it saw last.
func TestSeenRowsBounded(t *testing.T) {
	var r seenRows
	if r.recent("k") {
		t.Fatal("an empty memory knows k")
	}
	r.saw("k")
	if !r.recent("k") || r.recent("other") {
		t.Fatal("after saw(k): want k known, other not")
	}
	r.at["k"] = time.Now().Add(-seenFor - time.Second)
	if r.recent("k") {
		t.Error("a key seen longer than seenFor ago is still known")
	}
	for i := range 3 * seenKeys {
		key := fmt.Sprint("key-", i)
		r.saw(key)
		if len(r.at) > seenKeys {
			t.Fatalf("after %d keys the memory holds %d, over %d", i+1, len(r.at), seenKeys)
		}
		if !r.recent(key) {
			t.Fatalf("key %d, just seen, is not known", i)
		}
	}
}
