// Package sqlitev1 reads a pi session stored in SQLite (FORMAT.md §10,
// session_sqlite.rs) into the normalized model: exactly one row in
// pi_session_header whose id equals its JSON's id, a version-3 header, and
// pi_session_entries rows with seq contiguous from 1, each json an entry
// the reference's typed model accepts; then the same id synthesis and graph
// checks as JSONL (readers/normalize).
//
// # How the database is opened: a private snapshot
//
// The source must never be modified, nothing may be created beside it, and
// a directory pisess cannot write must not matter. SQLite itself cannot
// promise that for a read-only connection (measured with modernc 1.61.1,
// SQLite 3.5x, as root and in a 0555 directory):
//
//   - mode=ro on a WAL database whose writer closed cleanly (no -wal, the
//     usual state of a pi session at rest) creates an empty -wal and a
//     -shm next to it;
//   - mode=ro after a writer was killed rewrites the -shm (WAL-index
//     recovery); with only a -wal left it creates the -shm;
//   - readonly_shm=1 cannot open without an existing -shm and still
//     leaves an empty -wal behind;
//   - immutable=1 creates and locks nothing, but ignores the WAL, so
//     committed transactions still in it are invisible.
//
// So Open reads a copy. Under a shared lock on the database file, taken
// as SQLite's own readers take it (a read lock on the PENDING byte, then
// on the SHARED range: on Linux an OFD lock, so that no close(2) elsewhere
// in the process drops it; on macOS and FreeBSD a POSIX lock, as their
// SQLite takes, one per file in the process at a time: see sharedLock),
// it copies the database and, when present, its -wal and -journal into a
// private 0700 temporary directory (never the -shm: the copy rebuilds its
// WAL index from the -wal), then opens the copy.
// The copy sees every transaction committed in the WAL (a live writer's
// or a crashed one's) and none that is not, rolls back a hot journal of a
// crashed rollback-mode writer, and all of that happens in the copy: the
// original's files are only ever read. The directory is removed by Close.
//
// The shared lock keeps a rollback-journal writer from committing during
// the copy and keeps a closing WAL writer from checkpointing and deleting
// its WAL. A live WAL writer can still commit (appending to the -wal,
// which the copy's recovery then cuts at the last complete commit) or
// checkpoint (which changes the database file): Open compares the
// database file's status and the WAL header before and after the copy and
// copies again when they differ, up to five times, then returns a
// *readers.SourceChangedError (the run's failure, as for a JSONL session
// written while read: the next run copies it again). A writer holding an exclusive lock
// (rollback-journal mode during a commit, or locking_mode=EXCLUSIVE) makes
// Open wait up to Options.BusyTimeout, then refuse with ClassLocked. In
// WAL mode, BEGIN EXCLUSIVE does not lock readers out, for the reference
// either: Open reads the last committed state.
//
// pisess holds the session lock while it migrates, so in practice nothing
// writes during the copy; the checks are there for writers that ignore it.
package sqlitev1
