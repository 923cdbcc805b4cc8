//go:build (linux && portable) || freebsd

package durable

// native is the platform this binary uses (sys.go): the POSIX fallbacks,
// FreeBSD's, and a Linux build's with -tags portable so that its tests run
// the code macOS and FreeBSD run.
type native = posixSys
