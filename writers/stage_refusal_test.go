package writers

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

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
