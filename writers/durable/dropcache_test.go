package durable

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

func TestDropCachedRefusesSymlinkedDir(t *testing.T) {
	base := symlinkTree(t)
	err := OS.DropCached(filepath.Join(base, "link", "dir"))
	if !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("err = %v, want ELOOP", err)
	}
}
