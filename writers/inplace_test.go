package writers

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/writers/store"
)

// TestAppendInPlace: the sidecar continued in place is byte for byte the
// store staged from every entry, the appended entries continuing its last
// entry or branching from an earlier one (the store then checked again
// with its frames read for their links and the source opened again, once,
// before anything is written); whatever stops it before Prepare (too much
// appended, a source that fails part way, Prepare's own error) leaves the
// store exactly as it was, and Prepare is called only once every entry has
// been read and accepted.
func TestAppendInPlace(t *testing.T) {
	base := []readers.Entry{entry("a1", ""), entry("a2", "a1"), entry("a3", "a2"), entry("a4", "a3")}
	more := []readers.Entry{entry("b1", "a4"), entry("b2", "b1"), entry("b3", "b1")}
	opener := func(src *sliceSource) OpenAppended {
		return func(func(string) bool) (readers.Source, error) { return src, nil }
	}
	boom := errors.New("boom")
	cases := []struct {
		name     string
		src      *sliceSource
		held     int
		prepare  error
		want     error
		prepared bool
	}{
		{"too much appended", newSource(more...), 100, nil, ErrTooMuchAppended, false},
		{"the source fails part way", &sliceSource{header: newSource().header, entries: more[:1], err: boom}, 0, nil, boom, false},
		{"Prepare fails", newSource(more...), 0, boom, boom, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := stagedSmall(t, base)
			before := fixtures.TreeDigest(t, dir)
			prepared := false
			_, err := AppendInPlace(context.Background(), dir, opener(c.src), InPlaceOptions{
				StageOptions: StageOptions{Clock: clock, MaxSegmentBytes: 1024}, MaxHeldBytes: c.held,
				Prepare: func(store.Base, int) error { prepared = true; return c.prepare },
			})
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if prepared != c.prepared {
				t.Fatalf("Prepare called: %v, want %v", prepared, c.prepared)
			}
			if !maps.Equal(before, fixtures.TreeDigest(t, dir)) {
				t.Fatal("the store was changed")
			}
		})
	}
	for _, c := range []struct {
		name  string
		more  []readers.Entry
		opens int
	}{
		{"appended", more, 1},
		{"a branch from an earlier entry", []readers.Entry{entry("b1", "a2"), entry("b2", "b1"), entry("b3", "a2")}, 2},
	} {
		t.Run(c.name, func(t *testing.T) { appendedInPlace(t, base, c.more, c.opens) })
	}
}

// appendedInPlace continues a store staged from base with more, checks
// the calls AppendInPlace makes (the source opened opens times) and that
// the result is the store staged from all the entries at once.
func appendedInPlace(t *testing.T, base, more []readers.Entry, opens int) {
	dir := stagedSmall(t, base)
	var got store.Base
	manifest, err := os.ReadFile(store.ManifestPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	// Written comes after Prepare, once, with the old manifest still
	// in place (what follows it is the manifest's replacement).
	var calls []string
	opened := 0
	open := func(func(string) bool) (readers.Source, error) { opened++; return newSource(more...), nil }
	res, err := AppendInPlace(context.Background(), dir, open, InPlaceOptions{
		StageOptions: StageOptions{Clock: clock, MaxSegmentBytes: 1024},
		Prepare:      func(b store.Base, n int) error { got = b; calls = append(calls, "prepare"); return nil },
		Written: func() {
			now, err := os.ReadFile(store.ManifestPath(dir))
			if err != nil || !bytes.Equal(now, manifest) {
				t.Errorf("Written: the manifest was already replaced (%v)", err)
			}
			calls = append(calls, "written")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(calls, " ") != "prepare written" || opened != opens {
		t.Errorf("calls %v, the source opened %d times; want Prepare then Written, %d opens", calls, opened, opens)
	}
	if got.Manifest.Counters.EntriesTotal != uint64(len(base)) || len(res.Appended) != len(more) || res.Entries != uint64(len(base)+len(more)) {
		t.Fatalf("base %d entries, appended %d, store %d", got.Manifest.Counters.EntriesTotal, len(res.Appended), res.Entries)
	}
	full := stagedSmall(t, append(append([]readers.Entry{}, base...), more...))
	if want, have := fixtures.TreeDigest(t, full), fixtures.TreeDigest(t, dir); !maps.Equal(want, have) {
		t.Fatalf("continued in place:\n%v\nstaged at once:\n%v", have, want)
	}
}

// stagedSmall stages entries at the test clock in segments of 1 KiB.
func stagedSmall(t *testing.T, entries []readers.Entry) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s.v2")
	if _, err := Stage(context.Background(), newSource(entries...), dir, StageOptions{Clock: clock, MaxSegmentBytes: 1024}); err != nil {
		t.Fatal(err)
	}
	return dir
}
