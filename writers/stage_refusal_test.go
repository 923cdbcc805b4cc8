package writers

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// bigEntry is a label entry whose payload is about size bytes.
func bigEntry(id, parent string, size int) readers.Entry {
	e := entry(id, parent)
	e.Payload = []byte(`{"id":"` + id + `","parentId":"` + parent + `","timestamp":"2026-01-05T10:00:01.000Z","type":"label","label":"` +
		strings.Repeat("x", size) + `","targetId":"` + id + `"}`)
	e.Position = 3
	return e
}

// TestStageRefusesWhatTheReferenceRefuses: an entry whose frame is over
// the reference's 64 MiB segment, and a staging directory whose name the
// file system refuses, are the reference's refusals of the session (a
// *readers.RefusedError with its class, the session path and the entry's
// line), not failures of the run; a frame over a smaller segment size the
// caller chose is a plain error (issue 32 §3: both were "failed", exit 4,
// on every run).
func TestStageRefusesWhatTheReferenceRefuses(t *testing.T) {
	const session = "/t/--p--/s.jsonl"
	t.Run("frame over 64 MiB", func(t *testing.T) {
		src := newSource(entry("a0000001", ""), bigEntry("a0000002", "a0000001", wire.MaxSegmentBytes))
		_, err := Stage(context.Background(), src, filepath.Join(t.TempDir(), "s.v2.staging.x"), StageOptions{Clock: clock, SourcePath: session})
		r := readers.AsVerdict(err)
		if r == nil || r.Class != readers.ClassFrameTooLarge || r.Path != session || r.Line != 3 || !errors.Is(err, store.ErrTooLarge) {
			t.Fatalf("error %v (refusal %+v), want a frame_too_large refusal of %s at line 3", err, r, session)
		}
	})
	t.Run("frame over a chosen segment size", func(t *testing.T) {
		src := newSource(entry("a0000001", ""), bigEntry("a0000002", "a0000001", 8192))
		_, err := Stage(context.Background(), src, filepath.Join(t.TempDir(), "s.v2.staging.x"),
			StageOptions{Clock: clock, SourcePath: session, MaxSegmentBytes: 4096})
		if err == nil || !errors.Is(err, store.ErrTooLarge) || readers.AsRefused(err) != nil {
			t.Fatalf("error %v, want a plain ErrTooLarge: --max-segment-bytes is no verdict on the session", err)
		}
	})
	t.Run("staging name too long", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), strings.Repeat("n", 234)+".v2.staging."+strings.Repeat("ab", 16))
		_, err := Stage(context.Background(), newSource(entry("a0000001", "")), dir, StageOptions{Clock: clock, SourcePath: session})
		r := readers.AsVerdict(err)
		if r == nil || r.Class != readers.ClassNameTooLong || r.Path != session {
			t.Fatalf("error %v (refusal %+v), want a name_too_long refusal of %s", err, r, session)
		}
	})
}

// TestAppendRefusesWhatTheReferenceRefuses: the refresh (AppendInPlace,
// before it prepares anything) refuses an appended entry whose frame is
// over the reference's segment as Stage does, and the store continued in
// place is left exactly as it was (issue 32 §3).
func TestAppendRefusesWhatTheReferenceRefuses(t *testing.T) {
	const session = "/t/--p--/s.jsonl"
	base := []readers.Entry{entry("a0000001", ""), entry("a0000002", "a0000001")}
	more := []readers.Entry{entry("b0000001", "a0000002"), bigEntry("b0000002", "b0000001", wire.MaxSegmentBytes)}
	staged := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "s.v2")
		if _, err := Stage(context.Background(), newSource(base...), dir, StageOptions{Clock: clock}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	open := func(func(string) bool) (readers.Source, error) { return newSource(more...), nil }
	check := func(t *testing.T, err error) {
		t.Helper()
		if r := readers.AsVerdict(err); r == nil || r.Class != readers.ClassFrameTooLarge || r.Path != session || r.Line != 3 {
			t.Fatalf("error %v (refusal %+v), want a frame_too_large refusal of %s at line 3", err, r, session)
		}
	}
	t.Run("AppendInPlace", func(t *testing.T) {
		dir := staged(t)
		before := fixtures.TreeDigest(t, dir)
		prepared := false
		_, err := AppendInPlace(context.Background(), dir, open, InPlaceOptions{StageOptions: StageOptions{Clock: clock, SourcePath: session},
			Prepare: func(store.Base, int) error { prepared = true; return nil }})
		check(t, err)
		if prepared || !maps.Equal(before, fixtures.TreeDigest(t, dir)) {
			t.Errorf("prepared %t; the store changed: %t", prepared, !maps.Equal(before, fixtures.TreeDigest(t, dir)))
		}
	})
}
