package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"pisess/writers/durable"
	"sort"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/writers/wire"
)

// fixedClock is the time every reference vector was written at.
func fixedClock() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

func vectors(tb testing.TB) string {
	tb.Helper()
	return fixtures.VectorsDir(tb)
}

// vectorCase is one vector folder with a reference store.
type vectorCase struct {
	name      string // e.g. accept/rollover
	dir       string
	reference string // its reference.v2
	maxSeg    int64
}

func vectorCases(tb testing.TB) []vectorCase {
	tb.Helper()
	root := vectors(tb)
	var out []vectorCase
	for _, group := range []string{"accept", "edge", "realpi"} {
		dirs, _ := filepath.Glob(filepath.Join(root, group, "*"))
		sort.Strings(dirs)
		for _, d := range dirs {
			ref := filepath.Join(d, "reference.v2")
			if st, err := os.Stat(ref); err != nil || !st.IsDir() {
				continue
			}
			c := vectorCase{name: group + "/" + filepath.Base(d), dir: d, reference: ref, maxSeg: wire.MaxSegmentBytes}
			if c.name == "accept/rollover" {
				c.maxSeg = 4096
			}
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		tb.Fatal("no vector stores")
	}
	return out
}

// sessionID reads the header id of a vector's source.jsonl.
func sessionID(tb testing.TB, dir string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "source.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	v, err := wire.ParseJSON(first, nil)
	if err != nil {
		tb.Fatal(err)
	}
	id, ok := v.Get("id")
	if !ok || id.Kind != wire.KindString {
		tb.Fatalf("%s: header has no id", dir)
	}
	return id.Str
}

// referenceFrames returns the frames of a reference store in file order
// (segments in number order, lines in order); payloads are copies.
func referenceFrames(tb testing.TB, ref string) []wire.Frame {
	tb.Helper()
	segs, _ := filepath.Glob(filepath.Join(ref, "segments", "*.seg"))
	sort.Strings(segs)
	var out []wire.Frame
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			tb.Fatal(err)
		}
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			f, err := wire.ParseFrame(b[:i+1])
			if err != nil {
				tb.Fatalf("%s: %v", seg, err)
			}
			out = append(out, f)
			b = b[i+1:]
		}
	}
	return out
}

// copyStore copies a store into a new temp dir the way a real store sits
// on disk: modes 0700/0600 (git keeps none) and the directories and lock
// file git cannot keep when empty.
func copyStore(tb testing.TB, src string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), "s.v2")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
			return os.Chmod(target, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, b, 0o600); err != nil {
			return err
		}
		return os.Chmod(target, 0o600)
	})
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range StoreDirs {
		if err := os.MkdirAll(filepath.Join(dst, d), 0o700); err != nil {
			tb.Fatal(err)
		}
		os.Chmod(filepath.Join(dst, d), 0o700)
	}
	if _, err := os.Stat(MutationLockPath(dst)); err != nil {
		if err := os.WriteFile(MutationLockPath(dst), nil, 0o600); err != nil {
			tb.Fatal(err)
		}
		os.Chmod(MutationLockPath(dst), 0o600)
	}
	return dst
}

// filesUnder lists the regular files under dir, relative, sorted.
func filesUnder(tb testing.TB, dir string) []string {
	tb.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// writeFromFrames builds a store at dir from the ids, types and payloads of
// frames, with the fixed clock.
func writeFromFrames(tb testing.TB, dir string, frames []wire.Frame, maxSeg int64, session string) *Writer {
	tb.Helper()
	w, err := Create(dir, Options{MaxSegmentBytes: maxSeg, Clock: fixedClock})
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range frames {
		if _, err := w.Append(f.EntryID, f.ParentEntryID, string(f.EntryType), f.Payload); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := w.WriteManifest(session, "jsonl_v3"); err != nil {
		tb.Fatal(err)
	}
	return w
}

func OSOps() durable.Ops { return durable.OS }

func asCorruption(err error, ce **CorruptionError) bool { return errors.As(err, ce) }
func isChecksum(err error) bool                         { return errors.Is(err, wire.ErrChecksum) }
func isTorn(err error) bool                             { return errors.Is(err, ErrTornTail) }
func isUncovered(err error) bool                        { return errors.Is(err, ErrUncovered) }
