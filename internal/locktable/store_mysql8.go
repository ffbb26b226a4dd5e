package locktable

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/sqllock/sqllock"
)

func init() { register(sqllock.MySQL, newMySQL) }

// mysqlCommonStore serves the MySQL path (MySQL 8, and MariaDB when
// chosen): MariaDB's statements without RETURNING and NEXTVAL. The take
// draws its token with sqllock_next_token() (migration 00010) in the
// upsert, under the row lock, and says who won through LAST_INSERT_ID: the
// token when the row is ours, 0 when it is another's (tokens start at 1).
// A take that inserted the row is one round trip; any other reads the row
// in a second statement: its hold count, or its holder when refused.
type mysqlCommonStore struct {
	*mysqlStore
	take1, peek string
}

// newMySQL is MariaDB's store with its own take and peek, read from
// sql/mysql.
func newMySQL(n names, cfg Config) store {
	base := newMariaDB(n, cfg).(*mysqlStore)
	base.q.take, base.q.takeFree = "", "" // MariaDB's, replaced by take1
	// No gates on this path: on a Galera node named locks are the node's
	// alone, and MySQL 8's named-lock waits are not measured here.
	base.gates = gateSQL{}
	f := statementFiles{dir: "mysql", names: strings.NewReplacer(backquotedTable, n.table)}
	return &mysqlCommonStore{mysqlStore: base, take1: f.text("take"), peek: f.text("peek")}
}

func (s *mysqlCommonStore) take(ctx context.Context, h handle, c Claim) (Attempt, error) {
	res, err := h.stmts.Exec(ctx, h.DB, s.take1, c.Key, c.Owner, c.Host, micros(c.TTL))
	if err != nil {
		return Attempt{}, err
	}
	tok, err := res.LastInsertId()
	if err != nil {
		return Attempt{}, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Attempt{}, err
	}
	if tok > 0 && n == 1 { // inserted
		return Attempt{Won: true, Token: tok, Holds: 1}, nil
	}
	// Taken over or held once more (2), or refused: the row says how many
	// holds, or who holds it and for how long.
	a := Attempt{Remaining: -1}
	var owner string
	var left int64
	err = h.queryRow(ctx, s.peek, []any{c.Key}, &a.Token, &owner, &a.Holds, &a.Host, &left)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if tok > 0 { // ours, and expired or released since
			return Attempt{Won: true, Token: tok, Holds: 1}, nil
		}
		return a, nil // freed since: the caller tries again
	case err != nil:
		return a, err
	case tok > 0:
		if owner != c.Owner || a.Token != tok {
			a.Holds = 1 // ours, and taken over since: the lease finds out
		}
		return Attempt{Won: true, Token: tok, Holds: a.Holds}, nil
	}
	a.Remaining = remaining(left)
	return a, nil
}
