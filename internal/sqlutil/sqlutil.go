// Package sqlutil holds the dialect details shared by the strategies:
// identifier validation and quoting, classification of driver errors,
// reading timestamp columns and running DDL scripts.
package sqlutil

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/sqllock/sqllock"
)

// MaxIdentLen is the longest identifier part accepted: PostgreSQL's limit,
// the smallest of the three dialects.
const MaxIdentLen = 63

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// QuoteIdent validates name as a table or column name, optionally
// schema-qualified ("schema.table"), and returns it quoted for d. Only
// letters, digits and underscores are accepted, so nothing a caller passes
// can change the shape of a statement.
func QuoteIdent(d sqllock.Dialect, name string) (string, error) {
	if !d.Valid() {
		return "", fmt.Errorf("%w: unknown dialect %v", sqllock.ErrInvalidOption, d)
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w: identifier %q has more than one dot", sqllock.ErrInvalidOption, name)
	}
	for i, p := range parts {
		if len(p) == 0 || len(p) > MaxIdentLen || !identRE.MatchString(p) {
			return "", fmt.Errorf("%w: identifier %q: want letters, digits and underscores, 1 to %d long, not starting with a digit", sqllock.ErrInvalidOption, name, MaxIdentLen)
		}
		// SQLite takes backticks too: a double-quoted name it cannot
		// resolve silently becomes a string literal, a backticked one is an
		// error.
		if d == sqllock.Postgres {
			parts[i] = `"` + p + `"`
		} else {
			parts[i] = "`" + p + "`"
		}
	}
	return strings.Join(parts, "."), nil
}

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

// PostgresToken is how every strategy draws a fencing token on PostgreSQL:
// the function of migration 00011, timeline << 40 | nextval of
// sqllock_fence_seq, so that a promoted standby's tokens are all larger
// than the old primary's even where its sequence stands lower. It is one
// function call inside the statement that holds the lock: no round trip.
const PostgresToken = "sqllock_next_token()"
