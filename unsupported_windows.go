package main

// pisess runs on Linux, macOS and FreeBSD, not on Windows (README,
// Platforms). The reference store builds for Windows, but there it keeps
// fewer promises than pisess must: its source fingerprints carry no file
// identity, directories are never fsynced, and symlinks are refused by
// reparse-point attributes rather than by opens beneath a directory
// handle. A port would need its own no-symlink opens (NtCreateFile
// relative to a handle), LockFileEx in place of flock and SQLite's POSIX
// locks, a cutover that a reader's open handle does not block, and a
// fingerprint without an inode, none of which this project can test. A
// Windows user can run pisess in WSL 2 over a tree that pi also uses from
// inside WSL; not over a Windows tree, whose locks pi for Windows takes
// where WSL does not see them.
//
// The line below stops a Windows build with that answer, rather than with
// a compile error deep in a package: main.go, which imports them all, is
// not built for Windows.
var _ = pisess_runs_on_Linux_macOS_and_FreeBSD__Windows_is_not_supported__see_Platforms_in_README_md

func main() {}
