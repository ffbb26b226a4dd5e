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
// alone when the namespace is empty. Every dialect derives its server-side
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

// LegacyMariaDBName is the GET_LOCK name the MariaDB path (sqllock.MariaDB) gave key
// before both MySQL-family paths took MySQLName: LockName(namespace,
// key) when it is at most 64 bytes, and otherwise its first bytes (at most
// 31, cut on a character boundary), "~" and the first 16 bytes of its
// SHA-256 in hex. Bytes, not characters, are counted, so the limit holds in
// any character set. It is kept to find the locks of older versions
// (IS_USED_LOCK).
func LegacyMariaDBName(namespace, key string) string {
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

// MySQLName is the GET_LOCK name of key on both MySQL-family paths
// (sqllock.MariaDB and sqllock.MySQL), so that a key is one lock
// whichever path each replica takes. MySQL 8 compares names without
// regard to case: "Job" and "job" would share one lock. A name of
// lower-case ASCII letters, digits and "_-.:/" of at most 64 bytes is kept
// as it is, since no other name folds to it; any other name becomes a
// readable prefix (at most 31 bytes of it, upper case folded, other bytes
// "_"), "~" and the first 16 bytes of the SHA-256 of the exact name in hex.
// The hash tells names apart by case; "~" appears in no kept name, so a
// hashed name never meets a kept one.
func MySQLName(namespace, key string) string {
	name := LockName(namespace, key)
	if len(name) <= MaxMySQLNameLen && caseSafe(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	prefix := []byte(name[:min(len(name), hashedPrefixLen)])
	for i, c := range prefix {
		switch {
		case 'A' <= c && c <= 'Z':
			prefix[i] = c + 'a' - 'A'
		case !safeByte(c):
			prefix[i] = '_'
		}
	}
	return string(prefix) + "~" + hex.EncodeToString(sum[:16])
}

func caseSafe(name string) bool {
	for i := 0; i < len(name); i++ {
		if !safeByte(name[i]) {
			return false
		}
	}
	return true
}

func safeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':' || c == '/'
}
