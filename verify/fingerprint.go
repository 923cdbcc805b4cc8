package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"pisess/readers"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// ErrSourceChanged is matched by a fingerprint whose source changed while
// it was hashed (its size, identity or modification time moved, or the
// bytes read differ from the size sampled first): the digest describes no
// state the file was ever in. It is readers.ErrSourceChanged: one cause,
// wherever it shows.
var ErrSourceChanged = readers.ErrSourceChanged

// Fingerprint takes the source fingerprint of the session file at path as
// the reference does (FORMAT.md §8): the file identity {device, inode,
// ctime} is sampled with fstat before hashing; the whole file is hashed;
// a second fstat must show the same size, identity and modification time,
// and the bytes read must equal the size first sampled, or the result is
// an error matching ErrSourceChanged. path is opened read-only with
// O_NOFOLLOW: a symlinked session file is refused.
func Fingerprint(path string) (wire.SourceFingerprint, error) {
	f, err := openSource(path)
	if err != nil {
		return wire.SourceFingerprint{}, fmt.Errorf("fingerprint: %w", err)
	}
	defer f.Close()
	return fingerprintOpen(f, nil)
}

// openSource opens a session file for reading the way the reference does:
// the last component must not be a symlink and the file must be regular.
func openSource(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return f, nil
}

// fileStat is what the fingerprint compares before and after hashing.
type fileStat struct {
	id    wire.FileIdentity
	size  int64
	mtime durable.Timespec
}

func statOf(f *os.File) (fileStat, error) {
	var sys unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &sys); err != nil {
		return fileStat{}, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	st := durable.StatOfUnix(&sys)
	return fileStat{
		id: wire.FileIdentity{
			Device:                st.Dev,
			Inode:                 st.Ino,
			ChangeTimeSeconds:     st.Ctime.Sec,
			ChangeTimeNanoseconds: st.Ctime.Nsec,
		},
		size:  st.Size,
		mtime: st.Mtime,
	}, nil
}

// fingerprintOpen hashes the open file f. during, when set, runs after the
// first chunk is hashed: the seam a test uses to change the file mid-hash.
func fingerprintOpen(f *os.File, during func()) (wire.SourceFingerprint, error) {
	before, err := statOf(f)
	if err != nil {
		return wire.SourceFingerprint{}, fmt.Errorf("fingerprint: %w", err)
	}
	h := sha256.New()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := f.ReadAt(buf, n)
		h.Write(buf[:k])
		n += int64(k)
		if during != nil {
			during()
			during = nil
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return wire.SourceFingerprint{}, fmt.Errorf("fingerprint %s: %w", f.Name(), err)
		}
	}
	after, err := statOf(f)
	if err != nil {
		return wire.SourceFingerprint{}, fmt.Errorf("fingerprint: %w", err)
	}
	if n != before.size || after != before {
		return wire.SourceFingerprint{}, fmt.Errorf("fingerprint %s: %w", f.Name(), ErrSourceChanged)
	}
	id := before.id
	return wire.SourceFingerprint{
		ByteLength:   uint64(n),
		SHA256:       hex.EncodeToString(h.Sum(nil)),
		FileIdentity: &id,
	}, nil
}

// sameIdentity reports whether a recorded identity equals the file's, in
// all four members; a missing one never matches.
func sameIdentity(recorded *wire.FileIdentity, now wire.FileIdentity) bool {
	return recorded != nil && *recorded == now
}

// FingerprintFrom is the fingerprint of a file whose every byte a reader
// hashed (sum, size) while its status stayed info before and after: what
// Fingerprint would compute, without reading the file again.
func FingerprintFrom(info os.FileInfo, size int64, sum [32]byte) (wire.SourceFingerprint, bool) {
	st, ok := durable.StatOf(info)
	if !ok || st.Size != size {
		return wire.SourceFingerprint{}, false
	}
	return wire.SourceFingerprint{
		ByteLength: uint64(size),
		SHA256:     hex.EncodeToString(sum[:]),
		FileIdentity: &wire.FileIdentity{
			Device: st.Dev, Inode: st.Ino, ChangeTimeSeconds: st.Ctime.Sec, ChangeTimeNanoseconds: st.Ctime.Nsec,
		},
	}, true
}
