package advisory

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/sqllock/sqllock"
)

func init() { register(sqllock.MySQLCommon, mysqlCommonStore{}) }

// mysqlCommonStore is the MySQL path (MySQL 8, and MariaDB when chosen):
// GET_LOCK under case-safe names (MySQLCommonName: MySQL 8 folds names to
// lower case), the token from sqllock_next_token() (migration 00010).
type mysqlCommonStore struct{ mysqlStore }

// IF calls the function only when GET_LOCK returned 1: the token is drawn
// by the session that holds the lock, while it holds it.
const (
	myCommonTry   = "SELECT IF(GET_LOCK(?, 0) = 1, sqllock_next_token(), NULL)"
	myCommonBlock = "SELECT IF(GET_LOCK(?, ?) = 1, sqllock_next_token(), NULL)"
)

func (mysqlCommonStore) lockID(namespace, key string) lockID {
	name := MySQLCommonName(namespace, key)
	sum := sha256.Sum256([]byte(name))
	// The wake-up key differs from the MySQL dialect's: the names differ.
	return lockID{args: []any{name}, wake: "c" + name, hash: binary.BigEndian.Uint64(sum[:8])}
}

func (mysqlCommonStore) try(ctx context.Context, h handle, id lockID, _ mode) (int64, bool, error) {
	return queryToken(ctx, h, myCommonTry, id.args)
}

func (mysqlCommonStore) block(ctx context.Context, h handle, id lockID, _ mode) (int64, bool, error) {
	return queryToken(ctx, h, myCommonBlock, []any{id.args[0], int64(blockFor / time.Second)})
}
