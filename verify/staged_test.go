package verify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/readers/jsonl"
	"pisess/writers"
	"pisess/writers/store"
)

// stageFor stages the session at path into staging with writers.Stage and
// returns what the read produced, as the migration does.
func stageFor(tb testing.TB, path, staging string, max int64) Staged {
	tb.Helper()
	src := openSrc(tb, path)
	st, err := writers.Stage(context.Background(), src, staging, writers.StageOptions{Clock: fixed, MaxSegmentBytes: max})
	if err != nil {
		tb.Fatal(err)
	}
	fp, ok := FingerprintFrom(src.FileInfo(), src.Size(), src.SHA256())
	if !ok {
		tb.Fatal("no fingerprint from the read")
	}
	return Staged{HeaderID: src.Header().ID, SourceFormat: src.Header().Format, Entries: st.Entries,
		ChainHash: st.ChainHash, EntryDigest: st.EntryDigest, Fingerprint: fp, Info: src.FileInfo()}
}

var anyOwner = Options{Accept: &AcceptOptions{OwnerUID: -1, OwnerGID: -1}}

// The staged verification passes exactly the stores the full one passes,
// on every vector that migrates, and the fingerprint the read took is the
// one Fingerprint computes.
func TestVerifiedStagedAgreesWithAgainstSource(t *testing.T) {
	vectors := append([]string{}, acceptVectors...)
	dirs, _ := filepath.Glob(filepath.Join(fixtures.VectorsDir(t), "realpi", "*", "reference.v2"))
	for _, d := range dirs {
		vectors = append(vectors, filepath.Join("realpi", filepath.Base(filepath.Dir(d))))
	}
	edges, _ := filepath.Glob(filepath.Join(fixtures.VectorsDir(t), "edge", "*", "source.jsonl"))
	for _, e := range edges {
		vectors = append(vectors, filepath.Join("edge", filepath.Base(filepath.Dir(e))))
	}
	staged := 0
	for _, v := range vectors {
		t.Run(v, func(t *testing.T) {
			s := newSession(t, v)
			if _, err := os.Stat(s.path); err != nil {
				t.Skip(err)
			}
			src, err := jsonl.Open(s.path, jsonl.Options{})
			if err != nil {
				t.Skipf("the reader refuses it: %v", err)
			}
			src.Close()
			staging := s.sidecar + ".staging.0123456789abcdef0123456789abcdef"
			rec := stageFor(t, s.path, staging, 4096)
			p, rep, err := VerifiedStaged(context.Background(), rec, staging, s.path, anyOwner)
			if err != nil || !p.Valid() {
				t.Fatalf("VerifiedStaged: %v %v", err, rep.Findings)
			}
			full := against(t, s.path, staging, Options{Staging: true})
			if !full.Verified() || full.Verification != rep.Verification || full.ChainHash != rep.ChainHash || full.Entries != rep.Entries {
				t.Fatalf("full verification %+v %v, staged %+v", full.Verification, full.Findings, rep.Verification)
			}
			fp, err := Fingerprint(s.path)
			if err != nil || !sameSource(fp, p.Fingerprint()) || *fp.FileIdentity != *p.Fingerprint().FileIdentity {
				t.Fatalf("fingerprint %+v, read's %+v (%v)", fp, p.Fingerprint(), err)
			}
			staged++
		})
	}
	if staged < len(acceptVectors) {
		t.Fatalf("only %d vectors staged", staged)
	}
}

// Every way the store on disk can differ from what was staged fails it.
func TestVerifiedStagedFindsDifferences(t *testing.T) {
	cases := []struct {
		name  string
		spoil func(t *testing.T, rec *Staged, staging, path string)
		code  string
	}{
		{"an entry's id, parent or type", func(t *testing.T, rec *Staged, _, _ string) { rec.EntryDigest[0] ^= 1 }, CodeEntriesSource},
		{"one entry fewer", func(t *testing.T, rec *Staged, _, _ string) { rec.Entries++ }, CodeEntriesSource},
		{"a payload", func(t *testing.T, rec *Staged, _, _ string) { rec.ChainHash = strings.Repeat("ab", 32) }, CodeChainBreak},
		{"a byte on disk", func(t *testing.T, _ *Staged, staging, _ string) {
			seg := store.SegmentPath(staging, 1)
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0x20
			if err := os.WriteFile(seg, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"the source appended to", func(t *testing.T, _ *Staged, _, path string) {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("\n")
			f.Close()
		}, CodeSourceChanged},
		{"the source chmodded", func(t *testing.T, _ *Staged, _, path string) { os.Chmod(path, 0o640) }, CodeSourceChanged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSession(t, "accept/rollover")
			staging := s.sidecar + ".staging.0123456789abcdef0123456789abcdef"
			rec := stageFor(t, s.path, staging, 4096)
			c.spoil(t, &rec, staging, s.path)
			p, rep, err := VerifiedStaged(context.Background(), rec, staging, s.path, anyOwner)
			// A source that changed since it was read is that cause
			// alone, no verification failure of the store (issue 34 §3).
			want := ErrNotVerified
			if c.code == CodeSourceChanged {
				want = ErrSourceChanged
			}
			if p.Valid() || !errors.Is(err, want) {
				t.Fatalf("passed %v err %v findings %v", p.Valid(), err, rep.Findings)
			}
			if c.code != "" && !hasCode(rep.Findings, c.code) {
				t.Fatalf("findings %v, want %s", codes(rep.Findings), c.code)
			}
		})
	}
}
