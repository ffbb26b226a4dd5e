package sqlutil

import "reflect"

// mysqlErrorType names github.com/go-sql-driver/mysql's server error, read
// by reflection so that this module never imports the driver (which would
// register the database/sql name "mysql" in every program that imports a
// strategy). Its Number field is the server's error code; the type has had
// that field since the driver's first release.
const (
	mysqlPkg       = "github.com/go-sql-driver/mysql"
	mysqlErrorName = "MySQLError"
)

// mysqlNumber returns the server error code of a MySQL or MariaDB error in
// err's chain.
func mysqlNumber(err error) (uint16, bool) {
	var n uint16
	ok := walk(err, func(e error) bool {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Pointer || v.IsNil() {
			return false
		}
		v = v.Elem()
		t := v.Type()
		if v.Kind() != reflect.Struct || t.Name() != mysqlErrorName || t.PkgPath() != mysqlPkg {
			return false
		}
		f := v.FieldByName("Number")
		if !f.IsValid() || !f.CanUint() {
			return false
		}
		n = uint16(f.Uint())
		return true
	})
	return n, ok
}

// isMySQLInvalidConn reports the driver's ErrInvalidConn, a plain
// errors.New value: recognised by its text, from no other package.
func isMySQLInvalidConn(err error) bool {
	return walk(err, func(e error) bool {
		return e.Error() == "invalid connection" && reflect.TypeOf(e).String() == "*errors.errorString"
	})
}
