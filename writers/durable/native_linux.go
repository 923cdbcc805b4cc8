//go:build linux && !portable

package durable

// native is the platform this binary uses (sys.go).
type native = linuxSys
