package sqlutil

import (
	"reflect"

	"github.com/sqllock/sqllock/internal/dberr"
)

// mysqlNumber returns the server error code of a MySQL or MariaDB error in
// err's chain.
func mysqlNumber(err error) (uint16, bool) { return dberr.MySQLNumber(err) }

// isMySQLInvalidConn reports the driver's ErrInvalidConn, a plain
// errors.New value: recognised by its text, from no other package.
func isMySQLInvalidConn(err error) bool {
	return walk(err, func(e error) bool {
		return e.Error() == "invalid connection" && reflect.TypeOf(e).String() == "*errors.errorString"
	})
}
