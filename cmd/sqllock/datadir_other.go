//go:build !unix

package main

import "io/fs"

// notPrivate finds nothing to say: permission bits mean little on
// Windows, whose per-user folders are private by their access lists.
func notPrivate(fs.FileInfo) (why, fix string) { return "", "" }
