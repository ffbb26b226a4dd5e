package advisory

import (
	"context"
	"time"

	"github.com/sqllock/sqllock"
)

func init() { register(sqllock.MySQL, mysqlCommonStore{}) }

// mysqlCommonStore is the MySQL path (MySQL 8, and MariaDB when chosen):
// GET_LOCK under the MariaDB path's names (case-safe, MySQLName:
// MySQL 8 folds names to lower case), the token from sqllock_next_token()
// (migration 00010).
type mysqlCommonStore struct{ mysqlStore }

// IF calls the function only when GET_LOCK returned 1: the token is drawn
// by the session that holds the lock, while it holds it.
const (
	myCommonTry   = "SELECT IF(GET_LOCK(?, 0) = 1, sqllock_next_token(), NULL)"
	myCommonBlock = "SELECT IF(GET_LOCK(?, ?) = 1, sqllock_next_token(), NULL)"
)

func (mysqlCommonStore) try(ctx context.Context, h handle, id lockID, _ mode) (int64, bool, error) {
	return queryToken(ctx, h, myCommonTry, id.args)
}

func (mysqlCommonStore) block(ctx context.Context, h handle, id lockID, _ mode) (int64, bool, error) {
	return queryToken(ctx, h, myCommonBlock, []any{id.args[0], int64(blockFor / time.Second)})
}
