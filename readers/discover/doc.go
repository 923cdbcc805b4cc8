// Package discover walks session trees (FORMAT.md §1): it finds every pi
// session, JSONL or SQLite, by extension and header (never by the shape of
// its name), pairs each with its <stem>.v2 sidecar, the staging and backup
// siblings an interrupted run may have left, and its <path>.lock, and says
// up front which sessions pisess must refuse because pi could never open
// their sidecar (a symlinked session file, a symlinked ancestor directory)
// or because two sessions would claim the same sidecar. The names are its
// too: SidecarPath, LockPath, and back from a sidecar to its session
// (SessionOfSidecar).
//
// Discovery only reads directory entries and the first line or header row
// of candidate files. It follows no symlink: a symlinked session file is
// refused, a symlinked directory inside a tree is reported and not entered.
// What it finds is a snapshot: the engine re-checks under the session lock
// with no-follow opens before it changes anything.
//
// It also says where sessions are by default: a user's own default tree
// (DefaultRoots, from the environment), and for root's --all-users every
// account's (Accounts, from the system's user database through getent,
// which it runs; UserDefaultRoot); and which tree a path belongs to
// (TreeRoot, TreeRoots). WalkPaths walks the paths of a command line, the
// default tree when there are none.
package discover
