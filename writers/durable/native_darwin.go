package durable

import "golang.org/x/sys/unix"

// native is the platform this binary uses (sys.go).
type native = darwinSys

// LookupOnly is the access mode to open a directory only to look names
// up beneath it (fstatat): O_RDONLY (O_SEARCH is not in every macOS).
const LookupOnly = unix.O_RDONLY
