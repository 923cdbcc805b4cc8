package store

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"pisess/fixtures"
	"pisess/writers/durable"
)

// inPlaceChain builds, at the fixed clock, a store at dir holding the
// chain ids[0] <- ids[1] <- ... with 1 KiB segments, and seals it; it
// returns the index digest's state (IndexSHA256State).
func inPlaceChain(tb testing.TB, dir string, ids []string) []byte {
	tb.Helper()
	return chainStore(tb, dir, ids, 1024)
}

// chainStore is inPlaceChain with segments of maxSegment bytes (0: the
// default).
func chainStore(tb testing.TB, dir string, ids []string, maxSegment int64) []byte {
	tb.Helper()
	w, err := Create(dir, Options{MaxSegmentBytes: maxSegment, Clock: fixedClock})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	appendChain(tb, w, "", ids)
	if _, err := w.WriteManifest(testSession, "jsonl_v3"); err != nil {
		tb.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		tb.Fatal(err)
	}
	return w.IndexSHA256State()
}

func appendChain(tb testing.TB, w *Writer, parent string, ids []string) {
	tb.Helper()
	for _, id := range ids {
		if _, err := w.Append(id, parent, "custom", payloadFor(id, parent)); err != nil {
			tb.Fatal(err)
		}
		parent = id
	}
}

func chainIDs(prefix string, n int) []string {
	var ids []string
	for i := 1; i <= n; i++ {
		ids = append(ids, prefix+strconv.Itoa(i))
	}
	return ids
}

// inPlaceModes are the ways ContinueInPlace reads the base's frames: each
// sets its options for a store whose index digest state is state.
var inPlaceModes = []struct {
	name string
	opt  func(o *Options, state []byte)
}{
	{"frames CRC-checked", func(*Options, []byte) {}},
	{"frames vouched", func(o *Options, state []byte) { o.FramesVouched, o.IndexSHA256State = true, state }},
	{"frames read for their links", func(o *Options, _ []byte) { o.BaseLinks = true }},
}

// TestContinueInPlace: a store continued where it lies, with any number
// of appended entries (none, within the last segment, rolling over), is
// byte for byte the store written from all the entries at once, however
// its frames are read; an empty store too.
func TestContinueInPlace(t *testing.T) {
	for _, c := range []struct{ base, more int }{{0, 3}, {6, 0}, {6, 1}, {6, 9}, {12, 40}} {
		for _, mode := range inPlaceModes {
			t.Run(strconv.Itoa(c.base)+"+"+strconv.Itoa(c.more)+", "+mode.name, func(t *testing.T) {
				base, more := chainIDs("a", c.base), chainIDs("b", c.more)
				dir := filepath.Join(t.TempDir(), "s.v2")
				state := inPlaceChain(t, dir, base)
				full := filepath.Join(t.TempDir(), "s.v2")
				inPlaceChain(t, full, append(append([]string{}, base...), more...))

				opt := Options{MaxSegmentBytes: 1024, Clock: fixedClock}
				mode.opt(&opt, state)
				w, b, err := ContinueInPlace(context.Background(), dir, opt)
				if err != nil {
					t.Fatal(err)
				}
				if b.Manifest.Counters.EntriesTotal != uint64(c.base) {
					t.Fatalf("base of %d entries, want %d", b.Manifest.Counters.EntriesTotal, c.base)
				}
				last := ""
				if c.base > 0 {
					last = base[len(base)-1]
				}
				appendChain(t, w, last, more)
				sealSame(t, w, dir, full)
			})
		}
	}
}

// TestContinueInPlaceIndexState: with the index digest's state recorded
// when the store was written, a vouched store's rows are not hashed again
// and the store continued is still byte for byte the one written at once,
// its index digest that store's; the digest comes from the state alone (a
// state of another index of the same length gives that index's digest,
// for the caller's record to refuse), and a state of another length, one
// crypto/sha256 did not write, or none refuses the store (every record
// pisess writes has one: the rows are never hashed again).
func TestContinueInPlaceIndexState(t *testing.T) {
	base, more := chainIDs("a", 6), chainIDs("b", 9)
	full := filepath.Join(t.TempDir(), "s.v2")
	inPlaceChain(t, full, append(append([]string{}, base...), more...))
	otherDir := filepath.Join(t.TempDir(), "s.v2")
	other := inPlaceChain(t, otherDir, chainIDs("c", 6))
	shorter := inPlaceChain(t, filepath.Join(t.TempDir(), "s.v2"), chainIDs("a", 5))
	continued := func(t *testing.T, state []byte) (string, *Writer, Base, error) {
		dir := filepath.Join(t.TempDir(), "s.v2")
		own := inPlaceChain(t, dir, base)
		if state == nil {
			state = own
		}
		w, b, err := ContinueInPlace(context.Background(), dir, Options{MaxSegmentBytes: 1024, Clock: fixedClock, FramesVouched: true, IndexSHA256State: state})
		return dir, w, b, err
	}

	dir, w, b, err := continued(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := os.ReadFile(IndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if b.IndexSHA256 != hexSHA256(idx) || b.IndexBytes != int64(len(idx)) {
		t.Fatalf("base index digest %s (%d bytes), the file's is %s (%d)", b.IndexSHA256, b.IndexBytes, hexSHA256(idx), len(idx))
	}
	appendChain(t, w, base[len(base)-1], more)
	if _, err := w.WriteManifest(testSession, "jsonl_v3"); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	sum := w.IndexSHA256()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if d := fixtures.TreeDigest(t, dir); !maps.Equal(d, fixtures.TreeDigest(t, full)) {
		t.Fatalf("the store continued from the recorded state differs from the one written at once:\n%v\n%v", d, fixtures.TreeDigest(t, full))
	}
	fullIdx, err := os.ReadFile(IndexPath(full))
	if err != nil {
		t.Fatal(err)
	}
	if sum != hexSHA256(fullIdx) {
		t.Fatalf("index digest %s after the append, the full store's is %s", sum, hexSHA256(fullIdx))
	}

	otherIdx, err := os.ReadFile(IndexPath(otherDir))
	if err != nil {
		t.Fatal(err)
	}
	if _, w, b, err := continued(t, other); err != nil {
		t.Fatalf("a state of another index of the same length: %v", err)
	} else {
		w.Close()
		if b.IndexSHA256 != hexSHA256(otherIdx) || b.IndexSHA256 == hexSHA256(idx) {
			t.Fatalf("index digest %s: want the state's %s, not the rows' %s", b.IndexSHA256, hexSHA256(otherIdx), hexSHA256(idx))
		}
	}
	for name, st := range map[string][]byte{"shorter": shorter, "garbage": []byte("not a state"), "none": {}} {
		_, w, _, err := continued(t, st)
		if w != nil {
			w.Close()
		}
		if !errors.Is(err, ErrNotResumable) {
			t.Errorf("%s state: err %v, want refused", name, err)
		}
	}
}

// TestContinueInPlaceFramesVouched: with FramesVouched the frames are not
// read (a damaged one, which the check refuses, goes unseen: the caller's
// vouching is all there is), while the rows and the segments' sizes still
// are (a torn tail is refused either way).
func TestContinueInPlaceFramesVouched(t *testing.T) {
	for _, c := range []struct {
		name    string
		damage  func(t *testing.T, dir string)
		refused bool
	}{
		{"damaged frame", func(t *testing.T, dir string) { fixtures.FlipByte(t, SegmentPath(dir, 1), 50) }, false},
		{"torn tail after the last frame", func(t *testing.T, dir string) {
			appendBytes(t, lastSegment(t, dir), []byte(`{"schema":"pi.session_store_v2.segm`))
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s.v2")
			state := inPlaceChain(t, dir, chainIDs("a", 6))
			c.damage(t, dir)
			w, _, err := ContinueInPlace(context.Background(), dir, Options{MaxSegmentBytes: 1024, Clock: fixedClock, FramesVouched: true, IndexSHA256State: state})
			if w != nil {
				w.Close()
			}
			if refused := errors.Is(err, ErrNotResumable); refused != c.refused {
				t.Fatalf("err %v, want refused %v", err, c.refused)
			}
		})
	}
}

// TestContinueInPlaceNames: with FramesVouched, the vouched listing stands
// for the directories (they are not listed again): the store's own
// listing continues it; a listing that shows a rollback intent, a
// checkpoint or a missing segment refuses it, though the directories hold
// none of that.
func TestContinueInPlaceNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s.v2")
	state := inPlaceChain(t, dir, chainIDs("a", 6))
	var listed []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, path)
		if rel == "." {
			rel = ""
		}
		listed = append(listed, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	without := func(name string) []string {
		return slices.DeleteFunc(slices.Clone(listed), func(n string) bool { return n == name })
	}
	for _, c := range []struct {
		name    string
		names   []string
		refused bool
	}{
		{"its own listing", listed, false},
		{"a rollback intent", append(slices.Clone(listed), "tmp/rollback.intent.json"), true},
		{"a checkpoint", append(slices.Clone(listed), "checkpoints/0000000000000001.json"), true},
		{"a segment missing", without("segments/0000000000000001.seg"), true},
		{"no segments directory", without("segments"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, _, err := ContinueInPlace(context.Background(), dir, Options{MaxSegmentBytes: 1024, Clock: fixedClock, FramesVouched: true, IndexSHA256State: state, Names: c.names})
			if w != nil {
				w.Close()
			}
			if refused := errors.Is(err, ErrNotResumable); refused != c.refused {
				t.Fatalf("err %v, want refused %v", err, c.refused)
			}
		})
	}
}

// TestContinueInPlaceRefuses: a store that is not exactly what its rows
// say, or whose files pisess must not write through, is refused with
// ErrNotResumable (or the link error) and left byte for byte as it was,
// whether its frames are CRC-checked or read for their links (bytes after
// the last frame of an earlier segment included: only the last segment's
// were looked at while the frames were CRC-checked); an entry whose branch
// only the base's frames could count is refused by Append before anything
// is written, unless they were read for their links.
func TestContinueInPlaceRefuses(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   error
	}{
		{"damaged frame", func(t *testing.T, dir string) { fixtures.FlipByte(t, SegmentPath(dir, 1), 50) }, ErrNotResumable},
		{"torn tail after the last frame", func(t *testing.T, dir string) {
			appendBytes(t, lastSegment(t, dir), []byte(`{"schema":"pi.session_store_v2.segm`))
		}, ErrNotResumable},
		{"bytes after the last frame of an earlier segment", func(t *testing.T, dir string) {
			if rows := indexRows(t, dir); rows[len(rows)-1].SegmentSeq < 2 {
				t.Fatal("the store has one segment")
			}
			appendBytes(t, SegmentPath(dir, 1), []byte("\n"))
		}, ErrNotResumable},
		{"unindexed segment", func(t *testing.T, dir string) {
			rows := indexRows(t, dir)
			if err := os.WriteFile(SegmentPath(dir, rows[len(rows)-1].SegmentSeq+1), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrNotResumable},
		{"last segment with a second name", func(t *testing.T, dir string) {
			if err := os.Link(lastSegment(t, dir), filepath.Join(t.TempDir(), "elsewhere")); err != nil {
				t.Fatal(err)
			}
		}, durable.ErrMultiLink},
		{"index with a second name", func(t *testing.T, dir string) {
			if err := os.Link(IndexPath(dir), filepath.Join(t.TempDir(), "elsewhere")); err != nil {
				t.Fatal(err)
			}
		}, durable.ErrMultiLink},
	}
	for _, c := range cases {
		for _, links := range []bool{false, true} {
			t.Run(c.name+map[bool]string{true: ", frames read for their links"}[links], func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "s.v2")
				inPlaceChain(t, dir, chainIDs("a", 8))
				c.damage(t, dir)
				before := fixtures.TreeDigest(t, dir)
				_, _, err := ContinueInPlace(context.Background(), dir, Options{MaxSegmentBytes: 1024, Clock: fixedClock, BaseLinks: links})
				if !errors.Is(err, c.want) {
					t.Fatalf("got %v, want %v", err, c.want)
				}
				if !maps.Equal(before, fixtures.TreeDigest(t, dir)) {
					t.Fatal("the refused store was changed")
				}
			})
		}
	}

	t.Run("child of an earlier base entry", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "s.v2")
		inPlaceChain(t, dir, chainIDs("a", 8))
		before := fixtures.TreeDigest(t, dir)
		w, _, err := ContinueInPlace(context.Background(), dir, Options{MaxSegmentBytes: 1024, Clock: fixedClock})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append("x1", "a3", "custom", payloadFor("x1", "a3")); !errors.Is(err, ErrBaseLinksNeeded) {
			t.Fatalf("a child of a3: %v, want ErrBaseLinksNeeded", err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(before, fixtures.TreeDigest(t, dir)) {
			t.Fatal("a refused Append changed the store")
		}
	})
}

// TestContinueInPlaceBaseLinks: a store whose frames were read for their
// links takes any parent: children of an earlier base entry (a branch
// only its frames can count) and of the last (twice: a branch the
// manifest's count continues) give, with small and default segments, the
// store written from all the entries at once; without BaseLinks the
// first is ErrBaseLinksNeeded and the second the same bytes.
func TestContinueInPlaceBaseLinks(t *testing.T) {
	base := chainIDs("a", 8)
	for _, maxSeg := range []int64{1024, 0} {
		for _, c := range []struct {
			name     string
			appended [][2]string // id, parent
			links    bool        // needs BaseLinks
		}{
			{"children of an earlier entry", [][2]string{{"x1", "a3"}, {"x2", "x1"}, {"x3", "a3"}}, true},
			{"two children of the last entry", [][2]string{{"x1", "a8"}, {"x2", "a8"}, {"x3", "x1"}}, false},
		} {
			t.Run(c.name+", segments of "+strconv.FormatInt(maxSeg, 10), func(t *testing.T) {
				full := filepath.Join(t.TempDir(), "s.v2")
				w, err := Create(full, Options{MaxSegmentBytes: maxSeg, Clock: fixedClock})
				if err != nil {
					t.Fatal(err)
				}
				appendChain(t, w, "", base)
				for _, a := range c.appended {
					if _, err := w.Append(a[0], a[1], "custom", payloadFor(a[0], a[1])); err != nil {
						t.Fatal(err)
					}
				}
				finishStore(t, w)
				for _, links := range []bool{true, false} {
					dir := filepath.Join(t.TempDir(), "s.v2")
					chainStore(t, dir, base, maxSeg)
					w, _, err := ContinueInPlace(context.Background(), dir, Options{MaxSegmentBytes: maxSeg, Clock: fixedClock, BaseLinks: links})
					if err != nil {
						t.Fatal(err)
					}
					var refused error
					for _, a := range c.appended {
						if _, err := w.Append(a[0], a[1], "custom", payloadFor(a[0], a[1])); err != nil {
							refused = err
							break
						}
					}
					if c.links && !links {
						w.Close()
						if !errors.Is(refused, ErrBaseLinksNeeded) {
							t.Fatalf("without BaseLinks: %v, want ErrBaseLinksNeeded", refused)
						}
						continue
					}
					if refused != nil {
						t.Fatalf("BaseLinks %v: %v", links, refused)
					}
					sealSame(t, w, dir, full)
				}
			})
		}
	}
}

// TestContinueInPlaceSmallBuffer: a store continued in place writes
// through the small append buffers (not the megabyte ones of a new
// store), and appends many times their size give the same bytes as the
// store written at once.
func TestContinueInPlaceSmallBuffer(t *testing.T) {
	base, more := chainIDs("a", 6), chainIDs("b", 2000)
	dir, full := filepath.Join(t.TempDir(), "s.v2"), filepath.Join(t.TempDir(), "s.v2")
	chainStore(t, dir, base, 0)
	chainStore(t, full, append(append([]string{}, base...), more...), 0)

	w, _, err := ContinueInPlace(context.Background(), dir, Options{Clock: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := w.segBuf.Size(); got != appendBufferSize {
		t.Errorf("segment buffer of %d bytes, want %d", got, appendBufferSize)
	}
	if got := w.idxBuf.Size(); got != appendBufferSize/4 {
		t.Errorf("index buffer of %d bytes, want %d", got, appendBufferSize/4)
	}
	appendChain(t, w, base[len(base)-1], more)
	sealSame(t, w, dir, full)
	seg := SegmentPath(dir, 1)
	if fi, err := os.Stat(seg); err != nil || fi.Size() < 4*appendBufferSize {
		t.Fatalf("segment %s: %v, want more than %d bytes written", seg, err, 4*appendBufferSize)
	}
}

// sealSame writes w's manifest, seals and closes it, and checks that the
// store at dir is byte for byte the one at full.
func sealSame(t *testing.T, w *Writer, dir, full string) {
	t.Helper()
	finishStore(t, w)
	if d := fixtures.TreeDigest(t, dir); !maps.Equal(d, fixtures.TreeDigest(t, full)) {
		t.Fatalf("the store continued in place differs from the one written at once:\n%v\n%v", d, fixtures.TreeDigest(t, full))
	}
}
