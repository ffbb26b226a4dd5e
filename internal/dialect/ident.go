package dialect

import (
	"fmt"
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
		q := Of(d).quote
		parts[i] = q + p + q
	}
	return strings.Join(parts, "."), nil
}
