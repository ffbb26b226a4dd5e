package filefence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sqllock/sqllock"
)

// Suffix names the file beside the data that records its token and that
// writers lock: "out.log" is fenced by "out.log.fence".
const Suffix = ".fence"

// lockPoll bounds the pause between two tries at the file lock, so that
// a wait ends soon after its context does.
const lockPoll = 50 * time.Millisecond

// A File is a local file whose writers are fenced: each write carries a
// fencing token and is refused when a larger one has written before it.
// A File holds no open descriptor between calls; it is safe for
// concurrent use, and any number of Files, in any processes, may name the
// same path.
type File struct {
	path  string
	fence string
}

// New returns the fenced file at path. It touches nothing: the data file
// and its token file (path+Suffix) are created by the first write.
func New(path string) (*File, error) {
	if path == "" {
		return nil, fmt.Errorf("filefence: %w: empty path", sqllock.ErrInvalidOption)
	}
	if err := supported(); err != nil {
		return nil, fmt.Errorf("filefence: %q: %w", path, err)
	}
	return &File{path: path, fence: path + Suffix}, nil
}

// Path returns the data file's path, as given.
func (f *File) Path() string { return f.path }

// Write runs fn with the data file open for reading and writing (created
// if missing), under an exclusive lock on the token file, after checking
// token against the one recorded there. A smaller recorded token refuses
// the write with an error matching sqllock.ErrStaleToken that names the
// file and both tokens, and fn does not run. A larger token is recorded,
// and synced, before fn runs; an equal one is accepted.
//
// ctx bounds the wait for the lock, and is checked once more after the
// token, immediately before fn: an ended context (inside sqllock.Do, a lost
// lease) refuses the write with its cause. fn must not keep the file or
// write to it after it returns, and must not wait on another writer of the
// same path: the lock is held until Write returns.
func (f *File) Write(ctx context.Context, token int64, fn func(data *os.File) error) error {
	if fn == nil {
		return fmt.Errorf("filefence: write %q: %w: nil function", f.path, sqllock.ErrInvalidOption)
	}
	return f.locked(ctx, token, func() error {
		data, err := os.OpenFile(f.path, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			return fmt.Errorf("filefence: write %q: %w", f.path, err)
		}
		if err := fn(data); err != nil {
			data.Close()
			return err
		}
		return data.Close()
	})
}

// Append appends p to the data file and syncs it, as Write does: refused
// with sqllock.ErrStaleToken when a larger token has written.
func (f *File) Append(ctx context.Context, token int64, p []byte) error {
	return f.locked(ctx, token, func() error {
		data, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
		if err != nil {
			return fmt.Errorf("filefence: append %q: %w", f.path, err)
		}
		_, err = data.Write(p)
		if err == nil {
			err = data.Sync()
		}
		if cerr := data.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("filefence: append %q: %w", f.path, err)
		}
		return nil
	})
}

// Replace replaces the data file's content with p, as Write does: it
// writes a new file beside it, syncs it and renames it over the old one,
// so a reader sees the old content or the new, never a part.
func (f *File) Replace(ctx context.Context, token int64, p []byte) error {
	return f.locked(ctx, token, func() error {
		if err := replace(f.path, p); err != nil {
			return fmt.Errorf("filefence: replace %q: %w", f.path, err)
		}
		return nil
	})
}

// Claim records token without writing the data: the first thing a new
// holder does before it reads the file to resume work, so that from then
// on every older holder's write is refused (see fence.Fence.Claim).
func (f *File) Claim(ctx context.Context, token int64) error {
	return f.locked(ctx, token, func() error { return nil })
}

// Last returns the largest token that has written (or claimed) the file,
// 0 if none has.
func (f *File) Last(ctx context.Context) (int64, error) {
	lf, err := f.lock(ctx, false)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer lf.Close()
	return f.readToken(lf)
}

// locked checks token under the exclusive lock, records it, and runs fn
// there.
func (f *File) locked(ctx context.Context, token int64, fn func() error) error {
	if token <= 0 {
		return fmt.Errorf("filefence: %q: %w: token %d is not a fencing token (they start at 1)", f.path, sqllock.ErrInvalidOption, token)
	}
	lf, err := f.lock(ctx, true)
	if err != nil {
		return err
	}
	defer lf.Close() // closing drops the lock
	last, err := f.readToken(lf)
	if err != nil {
		return err
	}
	if token < last {
		return fmt.Errorf("filefence: %q: %w: token %d is older than %d, already applied", f.path, sqllock.ErrStaleToken, token, last)
	}
	// The token check is the guarantee; this one only narrows the window
	// for a holder that already knows it has lost.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("filefence: %q (token %d): not written: %w", f.path, token, ctxErr(ctx))
	}
	if token > last {
		// Recorded before the data is touched, so a crash in between
		// leaves the fence raised, never the data ahead of it.
		if err := writeToken(lf, token); err != nil {
			return fmt.Errorf("filefence: %q: record token %d in %s: %w", f.path, token, f.fence, err)
		}
	}
	return fn()
}

// lock opens the token file and locks it, exclusive or shared, trying
// until ctx ends. A shared lock does not create the file.
func (f *File) lock(ctx context.Context, exclusive bool) (*os.File, error) {
	flag := os.O_RDWR | os.O_CREATE
	if !exclusive {
		flag = os.O_RDONLY
	}
	lf, err := os.OpenFile(f.fence, flag, 0o666)
	if err != nil {
		return nil, fmt.Errorf("filefence: %q: open %s: %w", f.path, f.fence, err)
	}
	wait := time.Millisecond
	for {
		ok, err := tryLock(lf, exclusive)
		if err != nil {
			lf.Close()
			return nil, fmt.Errorf("filefence: %q: lock %s: %w", f.path, f.fence, err)
		}
		if ok {
			return lf, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			lf.Close()
			return nil, fmt.Errorf("filefence: %q: waiting for another writer's lock on %s: %w", f.path, f.fence, ctxErr(ctx))
		case <-t.C:
		}
		wait = min(2*wait, lockPoll)
	}
}

// readToken reads the recorded token: 0 in an empty file.
func (f *File) readToken(lf *os.File) (int64, error) {
	b, err := io.ReadAll(io.NewSectionReader(lf, 0, 64))
	if err != nil {
		return 0, fmt.Errorf("filefence: %q: read %s: %w", f.path, f.fence, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("filefence: %q: %s holds %q, not a token; it was written by something else", f.path, f.fence, s)
	}
	return n, nil
}

// writeToken overwrites the token in place, at a fixed width, so that it
// is one small write of one block; the token file is never renamed, since
// a waiter would then lock the old one.
func writeToken(lf *os.File, token int64) error {
	if _, err := lf.WriteAt([]byte(fmt.Sprintf("%020d\n", token)), 0); err != nil {
		return err
	}
	if err := lf.Truncate(21); err != nil {
		return err
	}
	return lf.Sync()
}

// replace writes p to a new file beside path, syncs it and renames it
// over path, keeping path's mode when it exists.
func replace(path string, p []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if _, err := tmp.Write(p); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ctxErr is ctx's error, with its cause (inside sqllock.Do, the loss of
// the lease) when that says more.
func ctxErr(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w (%w)", cause, err)
}
