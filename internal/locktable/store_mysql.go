package locktable

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/sqllock/sqllock"
)

func init() { register(sqllock.MariaDB, newMariaDB) }

// mysqlStore serves MariaDB: an upsert that returns the row as it left it
// (INSERT ... RETURNING), whose owner says who won, tokens from
// sqllock_fence_seq, and positional arguments.
type mysqlStore struct {
	statements
	q     struct{ take, takeFree, renew, held, release, releaseOwner, forceRelease, audit, reapFind, reapDelete string }
	table string  // the table's name as configured, for gate names
	gates gateSQL // empty where the server's named locks do not serve (the MySQL path)
	rows  seenRows
}

// newMariaDB reads its statements from sql/mariadb, on table n.table.
func newMariaDB(n names, cfg Config) store {
	f := statementFiles{dir: "mariadb", names: strings.NewReplacer(backquotedTable, n.table)}
	s := &mysqlStore{table: cfg.Table}
	// Gates are named locks; one session keeps many (MariaDB 10.0.2 on),
	// and a wait takes fractional seconds. The waiter lets go of the gate
	// in the statement that got it, so it never keeps a holder's Locker
	// from taking it again. A user may kill, and see in PROCESSLIST, its
	// own sessions without any privilege.
	s.gates = gateSQL{
		arm:    `SELECT GET_LOCK(?, 0)`,
		disarm: `DO RELEASE_LOCK(?)`,
		all:    `DO RELEASE_ALL_LOCKS()`,
		wait:   `SELECT GET_LOCK(?, ?), RELEASE_LOCK(?)`,
		line:   `SELECT GET_LOCK(?, ?)`,
		connID: `SELECT CONNECTION_ID()`,
		kill:   `KILL CONNECTION %d`,
		gone:   `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`,
	}
	f.read(map[string]*string{
		"take": &s.q.take, "take_free": &s.q.takeFree, "renew": &s.q.renew, "held": &s.q.held,
		"release": &s.q.release, "release_owner": &s.q.releaseOwner, "force_release": &s.q.forceRelease,
		"reap_find": &s.q.reapFind, "reap_delete": &s.q.reapDelete, "audit": &s.q.audit,
		"holder": &s.holder, "live": &s.live, "list": &s.list, "ddl": &s.ddl,
	})
	s.param = func(int) string { return "?" }
	return s
}

func (s *mysqlStore) take(ctx context.Context, h handle, c Claim) (Attempt, error) {
	var a Attempt
	if c.ExpectFree && s.rows.quiet(c.Key) {
		won, token, err := s.takeFree(ctx, h, c)
		if err != nil || won {
			return Attempt{Won: won, Token: token, Holds: 1}, err
		}
	}
	var owner string
	var left, held int64
	err := h.queryRow(ctx, s.q.take, []any{c.Key, c.Owner, c.Host, micros(c.TTL)}, &owner, &a.Token, &a.Holds, &a.Host, &left, &held)
	// The row as the upsert left it: ours if it names us (owners are
	// varbinary, compared byte for byte here as there).
	a.Won = owner == c.Owner
	if err == nil {
		s.rows.saw(c.Key, !a.Won)
	}
	a.Remaining = remaining(left)
	if !a.Won {
		a.HeldFor = remaining(held)
	}
	return a, err
}

// takeFree runs the plain update of c.Key's free row; it reports false
// when the update changed no row.
func (s *mysqlStore) takeFree(ctx context.Context, h handle, c Claim) (bool, int64, error) {
	res, err := h.stmts.Exec(ctx, h.DB, s.q.takeFree, c.Host, c.Owner, micros(c.TTL), c.Key)
	if err != nil {
		return false, 0, err
	}
	// The update always changes the token, so a row it matched counts as
	// changed.
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, 0, err
	}
	token, err := res.LastInsertId()
	if err != nil {
		return false, 0, err
	}
	s.rows.saw(c.Key, false)
	return true, token, nil
}

func (s *mysqlStore) renew(ctx context.Context, h handle, key, owner string, token int64, ttl time.Duration) (int64, time.Time, error) {
	sent := time.Now()
	n, err := h.exec(ctx, s.q.renew, micros(ttl), key, owner, token)
	if err != nil || n == 1 {
		return n, sent, err
	}
	// MariaDB counts changed rows, not matched ones: a renewal that leaves
	// a longer manual extension in place changes nothing, yet the row is
	// still ours.
	n, err = h.count(ctx, s.q.held, key, owner, token)
	return n, sent, err
}

func (s *mysqlStore) release(ctx context.Context, h handle, key, owner string, token int64, keep time.Duration) (int64, error) {
	return h.exec(ctx, s.q.release, micros(keep), key, owner, token)
}

func (s *mysqlStore) releaseOwner(ctx context.Context, h handle, key, owner string) (int64, error) {
	return h.exec(ctx, s.q.releaseOwner, key, owner)
}

func (s *mysqlStore) forceRelease(ctx context.Context, h handle, key string, token int64) (int64, error) {
	return h.exec(ctx, s.q.forceRelease, key, token)
}

func (s *mysqlStore) forceReleaseTx(ctx context.Context, tx *sql.Tx, key string, token int64) (int64, error) {
	return execTx(ctx, tx, s.q.forceRelease, key, token)
}

func (s *mysqlStore) audit(ctx context.Context, tx *sql.Tx, key string, token int64, table string, a Audit) (int64, error) {
	return execTx(ctx, tx, s.q.audit, table, a.Operator, a.Reason, key, token)
}

// reapChunk bounds the keys one DELETE names, well under the server's
// limit on placeholders.
const reapChunk = 1000

func (s *mysqlStore) reap(ctx context.Context, db *sql.DB, grace time.Duration, batch int) (int64, error) {
	rows, err := db.QueryContext(ctx, s.q.reapFind, micros(grace), batch)
	if err != nil {
		return 0, err
	}
	var keys []any
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, err
		}
		keys = append(keys, k)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var n int64
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), reapChunk)]
		keys = keys[len(chunk):]
		q := s.q.reapDelete + strings.Repeat("?, ", len(chunk)-1) + "?)"
		res, err := db.ExecContext(ctx, q, append([]any{micros(grace)}, chunk...)...)
		if err != nil {
			return n, err
		}
		d, err := res.RowsAffected()
		if err != nil {
			return n, err
		}
		n += d
	}
	return n, nil
}

func (s *mysqlStore) gateName(key string) string { return GateName(s.table, key) }

func (s *mysqlStore) lineName(key string) string { return LineName(s.table, key) }

func (s *mysqlStore) gateStatements() gateSQL { return s.gates }
