package dberr

import "reflect"

// isMySQLInvalidConn reports the driver's ErrInvalidConn, a plain
// errors.New value: recognised by its text, from no other package.
func isMySQLInvalidConn(err error) bool {
	return Walk(err, func(e error) bool {
		return e.Error() == "invalid connection" && reflect.TypeOf(e).String() == "*errors.errorString"
	})
}
