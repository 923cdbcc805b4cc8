package durable

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A staging store is written without fsyncs and sealed once by syncfs(2)
// (Ops.SealTree). syncfs reports a writeback error through the descriptor
// it is called on, by the file system's error sequence (errseq): to a
// descriptor opened after the error only while nobody has seen it, and to
// one opened before it always. A seal descriptor opened at the seal, after
// the writes, so misses the error of a staging file that the kernel wrote
// back (and failed) before, once anything else on the file system saw it:
// another syncfs or fsync of this run's, or of another user's process on a
// shared /home (issue 32 §4). A Seal is that descriptor opened before the
// first write it is to cover, kept until the seal.

// sealSeq orders the seals by when their descriptor was opened.
var sealSeq atomic.Uint64

// Seal is a descriptor on a file system, opened before the writes a later
// SealWith is to make durable, so that its syncfs reports any writeback
// error of theirs.
type Seal struct {
	f   *os.File
	seq uint64
}

// OpenSeal opens dir (no symlink in any component) as the seal of what
// will be written on its file system: call it before the first write to
// cover, and SealWith once they are done. The caller closes it.
func (o Ops) OpenSeal(dir string) (*Seal, error) {
	f, err := o.openFile(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return &Seal{f: f, seq: sealSeq.Add(1)}, nil
}

// Close releases the seal's descriptor.
func (s *Seal) Close() error {
	if s == nil || s.f == nil {
		return nil
	}
	return s.f.Close()
}

// SealWith is SealFilesystem through the seal s, opened before root's
// files were written: everything written under root is made durable, and
// a writeback error of any of it is reported, whoever saw it first. root
// must be on s's file system. With Ops.Seals the syncfs is shared with the
// run's other seals, made on the oldest descriptor among those waiting. A
// nil s is SealFilesystem.
func (o Ops) SealWith(s *Seal, root string) (dev uint64, whole bool, err error) {
	if s == nil {
		return o.SealFilesystem(root)
	}
	syncfs := o.SyncFS
	if syncfs == nil {
		syncfs = osSyncFS
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(s.f.Fd()), &st); err != nil {
		return 0, false, fmt.Errorf("seal %s: %w", root, err)
	}
	rst, err := Lstat(root)
	if err != nil {
		return 0, false, fmt.Errorf("seal %s: %w", root, err)
	}
	if rst.Dev != st.Dev {
		return 0, false, fmt.Errorf("seal %s: not on the file system of %s", root, s.f.Name())
	}
	dev, whole = uint64(st.Dev), true
	if o.Seals != nil {
		err = o.Seals.syncSeal(dev, s, syncfs)
	} else {
		err = syncfs(s.f)
	}
	if errors.Is(err, unix.ENOSYS) {
		// No syncfs (macOS, FreeBSD): each file is fsynced, its own
		// descriptor reporting its error; root's own entry is made
		// durable by the rename that installs it, which syncs the parent.
		o.DeferSync, whole = false, false
		err = o.SyncTree(root)
	}
	if err != nil {
		return 0, false, fmt.Errorf("seal %s: %w", root, err)
	}
	return dev, whole, nil
}
