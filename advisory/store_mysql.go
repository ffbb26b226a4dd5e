package advisory

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/sqllock/sqllock"
)

func init() { register(sqllock.MariaDB, mysqlStore{}) }

// mysqlStore serves MySQL/MariaDB named locks (GET_LOCK): exclusive and
// session-level only.
type mysqlStore struct{}

const (
	// IF evaluates NEXTVAL only when GET_LOCK returned 1: the token is drawn
	// by the session that holds the lock, while it holds it. The timeout is
	// 0: a statement on a shared session never waits in the server.
	myTry = "SELECT IF(GET_LOCK(?, 0) = 1, NEXTVAL(sqllock_fence_seq), NULL)"
	// The one statement that waits in the server, on a waiter session of
	// its own (GET_LOCK returns 0 when the timeout passes, NULL when killed).
	myBlock     = "SELECT IF(GET_LOCK(?, ?) = 1, NEXTVAL(sqllock_fence_seq), NULL)"
	myUnlock    = "SELECT RELEASE_LOCK(?)" // 1 released, 0 another session's, NULL free
	myUnlockAll = "SELECT RELEASE_ALL_LOCKS()"
)

// lockID names the lock MySQLName, as the MySQL path does, so that a
// key is one server lock on both paths: replicas on each, during a move
// from one to the other, exclude each other. LegacyMariaDBName, the name kept as
// written, would be another lock for any key MySQLName hashes.
func (mysqlStore) lockID(namespace, key string) lockID {
	name := MySQLName(namespace, key)
	sum := sha256.Sum256([]byte(name))
	return lockID{args: []any{name}, wake: "m" + name, hash: binary.BigEndian.Uint64(sum[:8])}
}

func (mysqlStore) try(ctx context.Context, h handle, id lockID, _ mode) (int64, bool, error) {
	return queryToken(ctx, h, myTry, id.args)
}

func (mysqlStore) block(ctx context.Context, h handle, id lockID, _ mode) (int64, bool, error) {
	return queryToken(ctx, h, myBlock, []any{id.args[0], int64(blockFor / time.Second)})
}

func (mysqlStore) backendID() string { return "SELECT CONNECTION_ID()" }

// interrupt ends the statement, not the session: KILL takes no
// placeholder, and id is the server's own number.
func (mysqlStore) interrupt(id int64) string { return "KILL QUERY " + strconv.FormatInt(id, 10) }

func (mysqlStore) unlock(ctx context.Context, h handle, id lockID, _ mode) (bool, error) {
	return queryHeld(ctx, h, myUnlock, id.args)
}

func (mysqlStore) unlockAll(ctx context.Context, h handle) error {
	var n any
	return h.queryRow(ctx, myUnlockAll, nil, &n)
}

func (s mysqlStore) acquireTx(context.Context, handle, lockID, bool) (int64, bool, error) {
	return 0, false, s.supports(featTx)
}

// prepare is true: go-sql-driver/mysql would otherwise prepare and close a
// server-side statement on every parameterised call.
func (mysqlStore) prepare() bool { return true }

func (mysqlStore) supports(f feature) error {
	switch f {
	case featShared:
		return fmt.Errorf("%w: MySQL named locks have no shared mode", sqllock.ErrUnsupported)
	case featTx:
		return fmt.Errorf("%w: MySQL named locks outlive transactions; use rowlock", sqllock.ErrUnsupported)
	}
	return nil
}
