package dberr

// IsUnstorable reports a value the server refused to store as given:
// PostgreSQL 22021 (a byte sequence invalid in the encoding, or NUL) and
// 22001 (too long for the column); MySQL 1366 (a character the column's
// character set lacks, or invalid), 1406 (too long) and 1300 (an invalid
// string). A strict sql_mode makes MySQL refuse rather than alter.
func IsUnstorable(err error) bool {
	if code, ok := pgCode(err); ok {
		return code == "22021" || code == "22001"
	}
	n, ok := MySQLNumber(err)
	return ok && (n == 1366 || n == 1406 || n == 1300)
}
