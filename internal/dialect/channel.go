package dialect

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// NotifyChannel is the PostgreSQL LISTEN/NOTIFY channel on which releases
// of a lock table's keys are announced. Channel names are identifiers, at
// most 63 bytes; longer ones are hashed (a collision only wakes a waiter
// that then finds its key still held).
func NotifyChannel(table string) string { return channel("sqllock:", table) }

// CallChannel is the start of the PostgreSQL channels on which a release
// of a lock table's key calls the waiting Locker it picked: each Locker
// listens on CallChannel(table) followed by its 16-character id, and the
// payload is the id of the Locker called, then the key. Its prefix differs
// from NotifyChannel's, so the two never collide; it leaves room for the
// id within the 63 bytes of a channel name.
func CallChannel(table string) string { return channelIn("sqllock>", table, 63-16) }

func channel(prefix, table string) string { return channelIn(prefix, table, 63) }

func channelIn(prefix, table string, limit int) string {
	ch := prefix + strings.ToLower(table)
	if len(ch) <= limit {
		return ch
	}
	h := fnv.New64a()
	h.Write([]byte(table))
	return fmt.Sprintf("%s%016x", prefix, h.Sum64())
}
