package rollback

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"syscall"

	"pisess/ledger"
	"pisess/writers/durable"
)

// linkDurable gives the file old the second name new (link(2), which never
// replaces and never follows a symlink at old) and fsyncs new's directory.
// A rollback keeps an upgraded source this way before it renames the
// original over it: no copy, and no moment when the session has no file.
func linkDurable(ops durable.Ops, old, new string) error {
	if err := ops.Link(old, new); err != nil {
		return err
	}
	return ops.SyncDir(filepath.Dir(new))
}

// sameFile reports whether a and b name the same file.
func sameFile(a, b string) (bool, error) {
	ia, err := ledger.InodeOf(a)
	if err != nil {
		return false, err
	}
	ib, err := ledger.InodeOf(b)
	if err != nil {
		return false, err
	}
	return ia == ib, nil
}

// copyInto copies the regular file src to dir/name, streaming, and returns
// the copy's path. The copy is written to dir/name.tmp (a leftover of a
// killed copy is replaced), sealed with dir by SyncTree, then renamed into
// place, so dir/name is only ever whole; its SHA-256 must be wantSHA (the
// caller holds the session lock, so the source cannot change meanwhile). A
// copy already in place with that digest is kept as it is.
func copyInto(ops durable.Ops, src, dir, name, wantSHA string) (string, error) {
	final := filepath.Join(dir, name)
	if k, err := lstatKind(final); err != nil {
		return "", err
	} else if k != kindMissing {
		d, err := fileDigest(ops, final, "")
		if err != nil || d.sha != wantSHA {
			return "", fmt.Errorf("%s exists and is not a copy of %s: left alone", final, src)
		}
		return final, nil
	}
	tmp := final + ".tmp"
	if k, err := lstatKind(tmp); err != nil {
		return "", err
	} else if k == kindFile {
		if err := removeFile(ops, tmp); err != nil {
			return "", err
		}
	}
	in, err := ops.OpenNoFollow(src, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := ops.CreatePrivate(tmp)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("copy %s: %w", src, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != wantSHA {
		return "", fmt.Errorf("copy %s: the file changed while it was copied (SHA-256 %s, expected %s)", src, got, wantSHA)
	}
	if err := ops.SyncTree(dir); err != nil {
		return "", err
	}
	if err := ops.RenameNoReplace(tmp, final); err != nil {
		return "", err
	}
	return final, nil
}
