// Package sqlscan finds, in the statement texts of a store, the constructs
// that MySQL 8 lacks, so that a test can keep the MySQL path
// (sqllock.MySQL) within what MySQL 8 and MariaDB both run.
package sqlscan

import (
	"reflect"
	"regexp"
)

// mariaDBOnly are constructs MariaDB has and MySQL 8 does not, by name.
var mariaDBOnly = []struct {
	name string
	re   *regexp.Regexp
}{
	{"RETURNING", regexp.MustCompile(`(?i)\bRETURNING\b`)},
	{"NEXTVAL", regexp.MustCompile(`(?i)\bNEXTVAL\b`)},
	{"SEQUENCE", regexp.MustCompile(`(?i)\bSEQUENCE\b`)},
	{"SET STATEMENT", regexp.MustCompile(`(?i)\bSET\s+STATEMENT\b`)},
	{"WAIT <n>", regexp.MustCompile(`(?i)\bWAIT\s+\d`)},
	{"SESSION_STATUS", regexp.MustCompile(`(?i)\bSESSION_STATUS\b`)},
}

// MariaDBOnly returns the names of the constructs in q that MySQL 8 lacks.
func MariaDBOnly(q string) []string {
	var found []string
	for _, c := range mariaDBOnly {
		if c.re.MatchString(q) {
			found = append(found, c.name)
		}
	}
	return found
}

// Strings returns every string reachable from v: fields (exported or
// not), pointers, slices, arrays, maps and interfaces, each string once.
// A store keeps its statement texts in such fields.
func Strings(v any) []string {
	var out []string
	seen := map[string]bool{}
	visited := map[uintptr]bool{}
	var walk func(reflect.Value)
	walk = func(r reflect.Value) {
		switch r.Kind() {
		case reflect.String:
			if s := r.String(); !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		case reflect.Pointer:
			if r.IsNil() || visited[r.Pointer()] {
				return
			}
			visited[r.Pointer()] = true
			walk(r.Elem())
		case reflect.Interface:
			if !r.IsNil() {
				walk(r.Elem())
			}
		case reflect.Struct:
			for i := range r.NumField() {
				walk(r.Field(i))
			}
		case reflect.Slice, reflect.Array:
			for i := range r.Len() {
				walk(r.Index(i))
			}
		case reflect.Map:
			it := r.MapRange()
			for it.Next() {
				walk(it.Key())
				walk(it.Value())
			}
		}
	}
	walk(reflect.ValueOf(v))
	return out
}
