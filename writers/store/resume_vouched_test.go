package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestResumeBaseVouched: a base resumed on the caller's word (frames only
// CRC-checked) continues exactly as one whose frames were all read: the
// same store bytes for entries that continue the last base entry, or
// branch from it twice; a parent that is an earlier base entry is
// ErrBaseLinksNeeded and leaves the writer usable; a damaged frame is
// still refused.
func TestResumeBaseVouched(t *testing.T) {
	w, base := newWriter(t, Options{MaxSegmentBytes: 1024})
	ids := []string{"a1", "a2", "a3", "a4", "a5", "a6"}
	parent := ""
	for _, id := range ids {
		if _, err := w.Append(id, parent, "custom", payloadFor(id, parent)); err != nil {
			t.Fatal(err)
		}
		parent = id
	}
	if _, err := w.WriteManifest(testSession, "jsonl_v3"); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	appended := [][2]string{{"b1", "a6"}, {"b2", "a6"}, {"b3", "b1"}} // a branch at a6
	resumed := func(vouched bool) string {
		dir := filepath.Join(t.TempDir(), "s.v2.staging")
		r, _, err := Resume(context.Background(), base, dir, Options{MaxSegmentBytes: 1024, Clock: fixedClock, BaseVouched: vouched})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if vouched {
			_, err := r.Append("x1", "a2", "custom", payloadFor("x1", "a2"))
			if !errors.Is(err, ErrBaseLinksNeeded) {
				t.Fatalf("a child of an earlier base entry: %v", err)
			}
		}
		for _, a := range appended {
			if _, err := r.Append(a[0], a[1], "custom", payloadFor(a[0], a[1])); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.WriteManifest(testSession, "jsonl_v3"); err != nil {
			t.Fatal(err)
		}
		if err := r.Seal(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	full, vouched := resumed(false), resumed(true)
	files := filesUnder(t, full)
	if got := filesUnder(t, vouched); len(got) != len(files) {
		t.Fatalf("files %v, want %v", got, files)
	}
	for _, f := range files {
		a, _ := os.ReadFile(filepath.Join(full, f))
		b, err := os.ReadFile(filepath.Join(vouched, f))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs (%v)", f, err)
		}
	}

	seg := SegmentPath(base, 1)
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[40] ^= 0x20
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = Resume(context.Background(), base, filepath.Join(t.TempDir(), "s.v2.staging"), Options{Clock: fixedClock, BaseVouched: true})
	if !errors.Is(err, ErrNotResumable) {
		t.Fatalf("a damaged base frame: %v", err)
	}
}
