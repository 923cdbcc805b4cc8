package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const exampleSession = "../../fixtures/example/sessions/--home-u-proj--/2026-01-05T10-00-00-000Z_3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b.jsonl"

func fixedClock() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

func TestBuildAndInspect(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.v2")
	var progress int64
	rep, err := Build(context.Background(), BuildOptions{
		Session: exampleSession, OutDir: out, Clock: fixedClock,
		Progress: func(n int64) { progress += n },
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Entries != 11 || rep.Bytes != 5971 || rep.Segments != 1 || rep.SourceFormat != "jsonl_v3" ||
		rep.SessionID != "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b" || uint64(progress) != rep.Bytes || rep.Replaced {
		t.Errorf("report %+v, progress %d", rep, progress)
	}
	if rep.Tally() != (Tally{}) {
		t.Errorf("tally %+v", rep.Tally())
	}
	ins, err := Inspect(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.Problems) != 0 || ins.Manifest == nil || ins.Counts.Entries != 11 || !ins.Counts.Complete ||
		ins.Manifest.Integrity.ChainHash != rep.ChainHash {
		t.Errorf("inspect %+v", ins)
	}
	if len(ins.ManifestDocument()) == 0 {
		t.Error("no manifest document")
	}
}

func TestBuildOutDir(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, out string)
		force bool
		usage bool
	}{
		{"absent", func(*testing.T, string) {}, false, false},
		{"exists without force", mkdir, false, true},
		{"empty dir with force", mkdir, true, false},
		{"file with force", func(t *testing.T, out string) { write(t, out) }, true, true},
		{"foreign dir with force", func(t *testing.T, out string) { mkdir(t, out); write(t, filepath.Join(out, "notes.txt")) }, true, true},
		{"dir of store names but no manifest or segments", func(t *testing.T, out string) { mkdir(t, out); mkdir(t, filepath.Join(out, "tmp")) }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "s.v2")
			tt.setup(t, out)
			_, err := Build(context.Background(), BuildOptions{Session: exampleSession, OutDir: out, Force: tt.force, Clock: fixedClock})
			var u *UsageError
			if got := errors.As(err, &u); got != tt.usage {
				t.Fatalf("usage error %v, want %v (err %v)", got, tt.usage, err)
			}
		})
	}
}

func TestBuildSegmentSizeBounds(t *testing.T) {
	for _, n := range []int64{-1, 64<<20 + 1} {
		_, err := Build(context.Background(), BuildOptions{Session: exampleSession, OutDir: filepath.Join(t.TempDir(), "x"), MaxSegmentBytes: n})
		var u *UsageError
		if !errors.As(err, &u) {
			t.Errorf("MaxSegmentBytes %d: %v, want a usage error", n, err)
		}
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}
