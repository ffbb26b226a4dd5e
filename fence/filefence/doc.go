// Package filefence fences writes to a local file, the way package fence
// fences rows: a writer passes its lease's fencing token, and a write
// under a token older than one already applied is refused.
//
// # Why fence.Write does not protect a file
//
// fence.Fence.Write refuses a stale holder's transaction, and only that:
// whatever its callback does outside the transaction happens anyway. A
// holder that appends to a file in the callback, loses its lease there
// (the loss cancels the context, and database/sql rolls the transaction
// back), and appends once more, lands its line after the next holder's.
// The check must be made by the file's own writers, atomically with the
// write.
//
// # How
//
// The token lives beside the data, in path+[Suffix] ("out.log.fence"), and
// every write takes an exclusive flock(2) on that file, reads the token,
// refuses an older one with an error matching [sqllock.ErrStaleToken],
// records a newer one (synced before the data is touched), writes, and
// lets go. No writer can come between another's check and its write. A
// holder paused before its write is refused when it resumes; one paused
// inside its write, past the check, holds every other writer of the file
// off until it resumes and finishes, so its line still lands before the
// next holder's, never after.
//
//	f, _ := filefence.New("/var/lib/app/out.log")
//	err := sqllock.Do(ctx, locker, "out.log", func(ctx context.Context) error {
//		token, _ := sqllock.TokenFrom(ctx)
//		return f.Append(ctx, token, line) // ErrStaleToken: a newer holder wrote
//	})
//
// [File.Append] appends, [File.Replace] writes a new file and renames it
// over the old, [File.Write] hands the caller the open file, and
// [File.Claim] raises the fence without writing, for a new holder that
// reads the file before it resumes work (as fence.Fence.Claim does for rows).
//
// Every writer of the file must go through this package (or take the same
// flock and honour the token file): the lock is advisory, and a plain
// os.WriteFile is not stopped. flock works between processes of one
// machine; on NFS and other network file systems it may not, and the file
// should be fenced at its server instead. Tokens of one key increase;
// fence a file with one key, as package fence says.
package filefence
