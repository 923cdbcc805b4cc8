// Package privtmp owns pisess's private temporary directories outside the
// session trees: the private copy of a SQLite session (readers/sqlitev1)
// and the staging store of a dry run. Each is <TMPDIR>/<prefix><random>/,
// mode 0700, with a lock file, .pisess-owner, that the process holding the
// directory keeps flocked for as long as it uses it.
//
// What it may touch on disk: directories it made, and, in Sweep, the
// directories of the same prefixes in the same temporary directory that
// belong to the running user, are real directories (no symlink), and
// whose lock file no process holds, or, lacking one, that nothing changed
// for a day (those of a pisess that predates the lock file).
//
// Crash story: a process killed while it holds a directory (a migrate
// SIGKILLed while it copies a 100 MB database) leaves it behind, its lock
// released by the kernel; the next pisess process that makes a directory
// of its own (Make) first removes every such dead one (issue 32 §3: no
// later run removed them). A crash during Sweep leaves a directory partly
// removed, still unlocked: the next Sweep finishes it. Nothing in these
// directories is the user's data: each is a copy or a staging store.
//
// Every removal is writers/durable's, by descriptor: a name swapped for a
// symlink is unlinked, never followed. The package imports nothing else
// of pisess, so that the readers may use it (STYLE.md §1).
package privtmp
