// Package dberr classifies driver errors without importing a driver:
// deadlocks, lock-wait timeouts, SQLite's busy errors, lost connections,
// what may be retried. It imports nothing of this module, so the root
// package uses it too.
package dberr

import "reflect"

// The go-sql-driver/mysql server error, read by reflection so that this
// module never imports the driver (which would register the database/sql
// name "mysql" in every program that imports a strategy). Its Number field
// is the server's error code; the type has had it since the driver's first
// release.
const (
	mysqlPkg       = "github.com/go-sql-driver/mysql"
	mysqlErrorName = "MySQLError"
)

// MySQLNumber returns the server error code of a MySQL or MariaDB error in
// err's chain.
func MySQLNumber(err error) (uint16, bool) {
	var n uint16
	ok := Walk(err, func(e error) bool {
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

// IsMissingRoutine reports MySQL's and MariaDB's "FUNCTION … does not
// exist" (1305) and PostgreSQL's undefined_function (42883): the routine
// is not there at all. A routine the user may not execute is another
// error (1370, 42501).
func IsMissingRoutine(err error) bool {
	if n, ok := MySQLNumber(err); ok {
		return n == 1305
	}
	code, ok := pgCode(err)
	return ok && code == "42883"
}

// Walk calls fn on err and on every error it wraps, depth first, until fn
// returns true; it reports whether one did.
func Walk(err error, fn func(error) bool) bool {
	if err == nil {
		return false
	}
	if fn(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return Walk(u.Unwrap(), fn)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if Walk(e, fn) {
				return true
			}
		}
	}
	return false
}
