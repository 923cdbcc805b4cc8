//go:build linux && !portable

package durable

import "golang.org/x/sys/unix"

// native is the platform this binary uses (sys.go).
type native = linuxSys

// LookupOnly is the access mode to open a directory only to look names
// up beneath it (fstatat): O_PATH, which reads nothing and needs no read
// permission.
const LookupOnly = unix.O_PATH
