package sqlitev1

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"pisess/readers"
	"pisess/readers/privtmp"
	"pisess/writers/durable"
)

// sqliteMagic starts every SQLite 3 database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// snapshotTries bounds how often a copy is retried when the database
// changed while it was being copied.
const snapshotTries = 5

// snapshot is a private copy of a database and its journals.
type snapshot struct {
	tmp    *privtmp.Dir // private temp dir, removed by remove
	dir    string
	db     string // the copy of the database file
	info   os.FileInfo
	size   int64
	digest [32]byte
}

func (sn *snapshot) remove() error { return sn.tmp.Remove() }

// fileState is what must not change while the database is copied.
type fileState struct {
	db     os.FileInfo
	walHdr []byte // first 32 bytes of the -wal; nil when there is none
	hasWAL bool
}

// takeSnapshot copies path (and its -wal and -journal) into a new private
// directory under tmpRoot, under SQLite's SHARED lock.
func takeSnapshot(path, tmpRoot string, busy time.Duration) (*snapshot, error) {
	f, info, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkDatabaseHeader(path, f, info); err != nil {
		return nil, err
	}
	lock, err := lockShared(f, busy)
	if err != nil {
		if errors.Is(err, errBusy) {
			return nil, &readers.RefusedError{Path: path, Class: readers.ClassLocked, Err: err,
				Reason: fmt.Sprintf("another process holds an exclusive lock on the database (waited %v)", busy)}
		}
		return nil, ioRefusal(path, "lock", err)
	}
	defer lock.unlock()

	// A private directory of this process (privtmp: the copies a killed
	// run left are removed by the next one).
	tmp, err := privtmp.Make(tmpRoot, privtmp.PrefixSQLite)
	if err != nil {
		return nil, ioRefusal(path, "make private copy directory", err)
	}
	sn := &snapshot{tmp: tmp, dir: tmp.Path, db: filepath.Join(tmp.Path, "session.sqlite")}
	for try := 1; ; try++ {
		same, err := sn.copyOnce(path, f)
		if err == nil && same {
			return sn, nil
		}
		if err == nil && try >= snapshotTries {
			// One cause with a JSONL session written while it is read
			// (readers.ErrSourceChanged): the next run copies it again.
			err = &readers.SourceChangedError{Path: path, Detail: fmt.Sprintf(
				"the database changed while it was copied, %d times: a writer is active without the session lock", try)}
		}
		if err != nil {
			sn.remove()
			return nil, err
		}
		time.Sleep(time.Duration(try) * 20 * time.Millisecond)
	}
}

// copyOnce copies the database, -wal and -journal, and reports whether
// nothing changed meanwhile.
func (sn *snapshot) copyOnce(path string, f *os.File) (bool, error) {
	before, err := stateOf(path, f)
	if err != nil {
		return false, err
	}
	for _, name := range []string{sn.db, sn.db + "-wal", sn.db + "-journal", sn.db + "-shm"} {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, ioRefusal(path, "clear private copy", err)
		}
	}
	h := sha256.New()
	n, err := copyTo(sn.db, io.TeeReader(io.NewSectionReader(f, 0, 1<<62), h))
	if err != nil {
		return false, ioRefusal(path, "copy database", err)
	}
	for _, suffix := range []string{"-wal", "-journal"} {
		if err := copySidecar(path+suffix, sn.db+suffix); err != nil {
			return false, err
		}
	}
	after, err := stateOf(path, f)
	if err != nil {
		return false, err
	}
	sn.info, sn.size = before.db, n
	copy(sn.digest[:], h.Sum(nil))
	same := sameFile(before.db, after.db) && n == before.db.Size() &&
		before.hasWAL == after.hasWAL && bytes.Equal(before.walHdr, after.walHdr)
	return same, nil
}

// stateOf samples the database file's status and its WAL header.
func stateOf(path string, f *os.File) (fileState, error) {
	info, err := f.Stat()
	if err != nil {
		return fileState{}, ioRefusal(path, "stat", err)
	}
	st := fileState{db: info}
	wal, err := os.OpenFile(path+"-wal", os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, sidecarRefusal(path+"-wal", err)
	}
	defer wal.Close()
	st.hasWAL = true
	hdr := make([]byte, 32)
	n, err := io.ReadFull(wal, hdr)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return st, ioRefusal(path+"-wal", "read", err)
	}
	st.walHdr = hdr[:n]
	return st, nil
}

// copySidecar copies src (a -wal or -journal) to dst when it exists. It
// must be a regular file, not a symlink.
func copySidecar(src, dst string) error {
	f, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return sidecarRefusal(src, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ioRefusal(src, "stat", err)
	}
	if !info.Mode().IsRegular() {
		return &readers.RefusedError{Path: src, Class: readers.ClassSpecialFile,
			Reason: "SQLite session artifacts must be regular files, not symlinks or special files"}
	}
	if _, err := copyTo(dst, f); err != nil {
		return ioRefusal(src, "copy", err)
	}
	return nil
}

// copyTo writes r into a new private file dst.
func copyTo(dst string, r io.Reader) (int64, error) {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// checkDatabaseHeader refuses what is not an SQLite 3 database, as the
// reference's sqlite_database_uses_wal does: the magic string, and file
// format versions 1/1 (rollback journal) or 2/2 (WAL).
func checkDatabaseHeader(path string, f *os.File, info os.FileInfo) error {
	if info.Size() == 0 {
		return &readers.RefusedError{Path: path, Class: readers.ClassEmptyFile, Reason: "empty file: not an SQLite database"}
	}
	var hdr [100]byte
	n, err := f.ReadAt(hdr[:], 0)
	if n < len(hdr) && err != nil && !errors.Is(err, io.EOF) {
		return ioRefusal(path, "read database header", err)
	}
	if n < 20 || !bytes.Equal(hdr[:16], sqliteMagic) {
		return &readers.RefusedError{Path: path, Class: readers.ClassCorrupt,
			Reason: "Invalid SQLite database header: the file does not start with \"SQLite format 3\""}
	}
	if w, r := hdr[18], hdr[19]; !(w == 1 && r == 1) && !(w == 2 && r == 2) {
		return &readers.RefusedError{Path: path, Class: readers.ClassCorrupt, Reason: fmt.Sprintf(
			"Unsupported SQLite file format versions: write=%d read=%d", w, r)}
	}
	if n < len(hdr) {
		return &readers.RefusedError{Path: path, Class: readers.ClassCorrupt,
			Reason: fmt.Sprintf("the database file is %d bytes, shorter than an SQLite header", n)}
	}
	return nil
}

// openRegular opens path for reading without following a symlink in its
// last component, and refuses anything but a regular file.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, &readers.RefusedError{Path: path, Class: readers.ClassSymlink, Err: err,
				Reason: "the session file is a symlink; pisess follows no symlink"}
		}
		return nil, nil, ioRefusal(path, "open", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, ioRefusal(path, "stat", err)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, &readers.RefusedError{Path: path, Class: readers.ClassSpecialFile,
			Reason: fmt.Sprintf("not a regular file (%s)", info.Mode().Type())}
	}
	return f, info, nil
}

func sidecarRefusal(path string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return &readers.RefusedError{Path: path, Class: readers.ClassSymlink, Err: err,
			Reason: "SQLite session artifacts must be regular files, not symlinks or special files"}
	}
	return ioRefusal(path, "open", err)
}

func ioRefusal(path, step string, err error) error {
	return &readers.RefusedError{Path: path, Class: readers.ClassIO, Reason: step + ": " + err.Error(), Err: err}
}

// sameFile compares identity, size, modification and change times.
func sameFile(a, b os.FileInfo) bool {
	if a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime()) {
		return false
	}
	sa, oka := durable.StatOf(a)
	sb, okb := durable.StatOf(b)
	if !oka || !okb {
		return true
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino && sa.Ctime == sb.Ctime
}
