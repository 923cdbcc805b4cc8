//go:build (linux && portable) || freebsd

package durable

import "golang.org/x/sys/unix"

// native is the platform this binary uses (sys.go): the POSIX fallbacks,
// FreeBSD's, and a Linux build's with -tags portable so that its tests run
// the code macOS and FreeBSD run.
type native = posixSys

// LookupOnly is the access mode to open a directory only to look names
// up beneath it (fstatat): O_RDONLY, as on macOS.
const LookupOnly = unix.O_RDONLY
