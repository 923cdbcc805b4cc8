package verify

// The metadata digests of the fresh cache (ledger.FreshCache): whether a
// sidecar and its session file are, file for file, what an earlier
// judgment saw. Every write to a file moves its change time, and change
// times cannot be set back; a change in the same tick of a coarse file
// clock as the metadata was read would not show, hence the racy window
// (git's racily-clean rule), which the caller chooses.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"pisess/readers/discover"
	"pisess/writers/durable"
)

// SidecarNames lists the sidecar's entries (directories walked, symlinks
// and special files listed, not followed), sorted; at most max.
func SidecarNames(sidecar string, max int) ([]string, error) {
	names := []string{""}
	err := filepath.WalkDir(sidecar, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == sidecar {
			return nil
		}
		if len(names) == max {
			return errTooManyNames
		}
		names = append(names, strings.TrimPrefix(p, sidecar+string(filepath.Separator)))
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

var errTooManyNames = errors.New("too many entries to cache")

// MetaDigest hashes the lstat metadata of each name under the sidecar:
// identity, type and mode, links, owner, size and both times. racy is set
// when a time is later than window before now (a zero now skips that
// test). ok is false when a name cannot be lstat'ed.
func MetaDigest(sidecar string, names []string, now time.Time, window time.Duration) (digest string, racy, ok bool) {
	// The names are looked up from the sidecar directory (one path walk
	// instead of one per name: this is most of a no-op run's work).
	dir, err := unix.Open(sidecar, durable.LookupOnly|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false, false
	}
	defer unix.Close(dir)
	d, ok := digestNames(names, func(_ int, n string) (discover.FileKey, bool) {
		var st unix.Stat_t
		var err error
		if n == "" {
			err = unix.Fstat(dir, &st)
		} else {
			err = unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			return discover.FileKey{}, false
		}
		k := discover.KeyOfUnix(&st)
		if !now.IsZero() && RacyKey(k, now, window) {
			racy = true
		}
		return k, true
	})
	return d, racy, ok
}

// KnownDigest is MetaDigest from the metadata a verification just read of
// each name (keys), those of changed (written since) read again.
func KnownDigest(sidecar string, names []string, keys []discover.FileKey, changed []string) (string, bool) {
	return digestNames(names, func(i int, n string) (discover.FileKey, bool) {
		if slices.Contains(changed, n) {
			return LstatKey(filepath.Join(sidecar, filepath.FromSlash(n)))
		}
		return keys[i], true
	})
}

// digestNames hashes each name with its metadata (key, which may fail:
// no digest then), the one digest of MetaDigest and KnownDigest.
func digestNames(names []string, key func(i int, name string) (discover.FileKey, bool)) (string, bool) {
	h := sha256.New()
	buf := make([]byte, 0, 8*11)
	for i, n := range names {
		k, ok := key(i, n)
		if !ok {
			return "", false
		}
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(k.AppendBinary(buf))
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

// SourceDigest is the digest of a session file's metadata
// (ledger.FreshEntry.Source).
func SourceDigest(k discover.FileKey) string {
	sum := sha256.Sum256(k.AppendBinary(make([]byte, 0, 8*11)))
	return hex.EncodeToString(sum[:16])
}

// LstatKey is the lstat metadata of path.
func LstatKey(path string) (discover.FileKey, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return discover.FileKey{}, false
	}
	return discover.KeyOfStat(&st), true
}

// sessionDigest is SourceDigest of the session file at path (metadata k)
// and, for a SQLite session, of its write-ahead log too: the commits a
// writer has not checkpointed live only in <file>-wal, the database file
// unchanged (issue 34 §3: the cache vouched by the database file alone,
// and a sidecar stayed at 1,000 entries of 3,000). walKey is the log's
// metadata, zero when there is none.
func sessionDigest(path string, k discover.FileKey) (digest string, walKey discover.FileKey) {
	if filepath.Ext(path) != discover.ExtSQLite {
		return SourceDigest(k), discover.FileKey{}
	}
	b := k.AppendBinary(make([]byte, 0, 2*8*11+1))
	if wk, ok := LstatKey(path + walSuffix); ok {
		walKey = wk
		b = append(wk.AppendBinary(b), 1)
	} else {
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), walKey
}

// RacyKey reports whether a time of k is later than window before now.
func RacyKey(k discover.FileKey, now time.Time, window time.Duration) bool {
	for _, t := range []time.Time{time.Unix(int64(k.MtimeSec), int64(k.MtimeNsec)), time.Unix(int64(k.CtimeSec), int64(k.CtimeNsec))} {
		if now.Sub(t) < window {
			return true
		}
	}
	return false
}
