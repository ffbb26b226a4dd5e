package main

import (
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
)

// defaultDataDir returns the folder of the embedded database when
// --data-dir is not given: the user's own state folder, sqllock in
// $XDG_STATE_HOME or else ~/.local/state (the cache folder on Windows).
// A fixed folder in the temporary directory could be made first by
// another user, who could then read or replace the database. The folder
// is created 0700, and one that exists must be the user's and writable by
// no one else.
func defaultDataDir() (string, error) {
	base, err := stateDir()
	if err != nil {
		return "", fail(exitBadDSN, "embedded database: no folder of your own to keep it in (%v): pass --data-dir DIR", err)
	}
	dir := filepath.Join(base, "sqllock")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fail(exitBadDSN, "embedded database: %v; pass --data-dir DIR to keep it elsewhere", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fail(exitBadDSN, "embedded database: %v", err)
	}
	if why, fix := notPrivate(fi); why != "" {
		return "", fail(exitBadDSN, "the embedded database's folder %s %s: another user could read or replace the database; %s, or pass --data-dir DIR", dir, why, fix)
	}
	return dir, nil
}

// stateDir is the XDG base directory for state data, which outlives a
// restart and belongs to one user (XDG_STATE_HOME, when absolute, else
// ~/.local/state), and the user's cache folder on Windows.
func stateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return d, nil
	}
	if runtime.GOOS == "windows" {
		return os.UserCacheDir()
	}
	home, err := os.UserHomeDir()
	if err != nil {
		// No $HOME, as for some services: the account's own.
		u, uerr := user.Current()
		if uerr != nil || u.HomeDir == "" {
			return "", errors.Join(err, uerr)
		}
		home = u.HomeDir
	}
	return filepath.Join(home, ".local", "state"), nil
}

// createPrivate creates the database file 0600 unless it exists. SQLite
// would create it with the umask's mode (0644 under the usual 022), and
// gives its -wal and -shm files the mode of the database file.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}
