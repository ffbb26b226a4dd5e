package advisory

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"unicode/utf8"
)

// MaxMySQLNameLen is the longest GET_LOCK name MySQL accepts (MariaDB is
// more lenient; the limit is kept for both so one name works everywhere).
const MaxMySQLNameLen = 64

// hashedPrefixLen is how much of a long name survives in front of its hash,
// so an operator reading IS_USED_LOCK output can still tell what it is.
const hashedPrefixLen = MaxMySQLNameLen - 1 - 32

// LockName is the name of key's lock in namespace: "namespace:key", or key
// alone when the namespace is empty. Both dialects derive their server-side
// lock from it (PostgresKey, MySQLName).
func LockName(namespace, key string) string {
	if namespace == "" {
		return key
	}
	return namespace + ":" + key
}

// PostgresKey is the 64-bit PostgreSQL advisory lock id of key: the first 8
// bytes of SHA-256(LockName(namespace, key)), read as a big-endian signed
// integer. The same id in SQL:
//
//	SELECT ('x' || encode(substring(sha256(convert_to('sqllock:' || $1, 'UTF8')) FROM 1 FOR 8), 'hex'))::bit(64)::bigint
//
// pg_locks shows it split in two: classid is the high 32 bits, objid the
// low 32 bits, objsubid is 1.
func PostgresKey(namespace, key string) int64 {
	sum := sha256.Sum256([]byte(LockName(namespace, key)))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// MySQLName is the GET_LOCK name of key: LockName(namespace, key) when it is
// at most 64 bytes, and otherwise its first bytes (at most 31, cut on a
// character boundary), "~" and the first 16 bytes of its SHA-256 in hex.
// Bytes, not characters, are counted, so the limit holds in any character
// set.
func MySQLName(namespace, key string) string {
	name := LockName(namespace, key)
	if len(name) <= MaxMySQLNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	n := hashedPrefixLen
	for n > 0 && !utf8.RuneStart(name[n]) {
		n--
	}
	return name[:n] + "~" + hex.EncodeToString(sum[:16])
}
