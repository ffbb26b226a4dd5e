//go:build unix

package main

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// notPrivate says why a folder is not the user's alone, and what to do,
// or "" when it is: owned by another user, or writable by its group or
// by everyone.
func notPrivate(fi fs.FileInfo) (why, fix string) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Sprintf("belongs to uid %d, not to you (uid %d)", st.Uid, os.Getuid()), "remove it"
	}
	if m := fi.Mode(); m.Perm()&0o022 != 0 {
		return fmt.Sprintf("is writable by other users (mode %v)", m), "if it is yours, chmod 700 it"
	}
	return "", ""
}
