package verify

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/writers/store"
	"pisess/writers/wire"
)

var acceptVectors = []string{
	"accept/tricky", "accept/idless_entries", "accept/header_only", "accept/rollover",
	"accept/custom_role_default_display",
}

func TestAgainstSourceBuiltStores(t *testing.T) {
	for _, v := range acceptVectors {
		t.Run(v, func(t *testing.T) {
			s := newSession(t, v)
			build(t, s.path, s.sidecar, 0)
			rep := against(t, s.path, s.sidecar, Options{})
			if !rep.Verified() || len(rep.Findings) != 0 {
				t.Fatalf("verification %+v, findings %v", rep.Verification, rep.Findings)
			}
			if rep.Entries != rep.SourceEntries || rep.ChainHash != rep.SourceChainHash {
				t.Fatalf("entries %d/%d chain %s/%s", rep.Entries, rep.SourceEntries, rep.ChainHash, rep.SourceChainHash)
			}
			for _, code := range InvariantCodes {
				if inv := rep.Invariants[code]; !inv.Holds || inv.Finding != nil {
					t.Errorf("%s: %+v", code, inv)
				}
			}
		})
	}
}

// The reference's own stores, with what git lost put back, verify too.
func TestAgainstSourceReferenceStores(t *testing.T) {
	for _, v := range acceptVectors {
		t.Run(v, func(t *testing.T) {
			s := newSession(t, v)
			copyReference(t, v, s.sidecar)
			rep := against(t, s.path, s.sidecar, Options{})
			if !rep.Verified() || len(rep.Findings) != 0 {
				t.Fatalf("verification %+v, findings %v", rep.Verification, rep.Findings)
			}
			if f := Acceptance(s.sidecar, s.path, AcceptOptions{HeaderID: openSrc(t, s.path).Header().ID, OwnerUID: -1, OwnerGID: -1}); len(f) != 0 {
				t.Fatalf("acceptance: %v", f)
			}
		})
	}
}

func TestAgainstSourceRealPi(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(fixtures.VectorsDir(t), "realpi", "*", "reference.v2"))
	if len(dirs) == 0 {
		t.Fatal("no realpi vectors in fixtures/vectors")
	}
	for _, d := range dirs {
		v := filepath.Join("realpi", filepath.Base(filepath.Dir(d)))
		t.Run(v, func(t *testing.T) {
			s := newSession(t, v)
			copyReference(t, v, s.sidecar)
			if rep := against(t, s.path, s.sidecar, Options{}); !rep.Verified() || len(rep.Findings) != 0 {
				t.Fatalf("verification %+v, findings %v", rep.Verification, rep.Findings)
			}
		})
	}
}

func TestAgainstSourceFindsDifferences(t *testing.T) {
	type check func(t *testing.T, rep Report)
	flags := func(count, chain, index bool) check {
		return func(t *testing.T, rep Report) {
			t.Helper()
			want := wire.Verification{EntryCountMatch: count, HashChainMatch: chain, IndexConsistent: index}
			if rep.Verification != want {
				t.Errorf("verification %+v, want %+v; findings %v", rep.Verification, want, rep.Findings)
			}
		}
	}
	finding := func(code string) check {
		return func(t *testing.T, rep Report) {
			t.Helper()
			if !hasCode(rep.Findings, code) {
				t.Errorf("no %s finding in %v", code, codes(rep.Findings))
			}
		}
	}
	broken := func(inv string) check {
		return func(t *testing.T, rep Report) {
			t.Helper()
			if i := rep.Invariants[inv]; i.Holds || i.Finding == nil {
				t.Errorf("%s holds (%+v); findings %v", inv, i, rep.Findings)
			}
		}
	}
	seg := func(s session) string { return store.SegmentPath(s.sidecar, 1) }
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, s session)
		checks []check
	}{
		{"source appended", func(t *testing.T, s session) {
			appendLine(t, s.path, `{"type":"label","id":"ffff0001","parentId":"a1b2c3d4","timestamp":"2026-01-05T10:09:00.000Z","targetId":"a1b2c3d4","label":"new"}`+"\n")
		}, []check{flags(false, false, true), finding(CodeEntriesSource)}},
		{"source payload edited, same ids", func(t *testing.T, s session) {
			b, _ := os.ReadFile(s.path)
			b = bytes.Replace(b, []byte("Hello <world>"), []byte("Hallo <world>"), 1)
			os.WriteFile(s.path, b, 0o600)
		}, []check{flags(true, false, true), finding(CodePayloadSource)}},
		{"flipped payload byte", func(t *testing.T, s session) {
			fixtures.FlipByte(t, seg(s), 300)
		}, []check{flags(false, false, false), finding(CodeIndexCRC), broken(INV003)}},
		{"missing manifest", func(t *testing.T, s session) {
			os.Remove(store.ManifestPath(s.sidecar))
		}, []check{flags(true, true, false), finding(CodeManifestMissing), broken(INV007)}},
		{"manifest counts wrong", func(t *testing.T, s session) {
			rewriteManifest(t, s.sidecar, func(m *wire.Manifest) { m.Counters.MessagesTotal-- })
		}, []check{flags(true, true, false), finding(CodeManifestMismatch), broken(INV007)}},
		{"manifest chain wrong", func(t *testing.T, s session) {
			rewriteManifest(t, s.sidecar, func(m *wire.Manifest) { m.Integrity.ChainHash = strings.Repeat("a", 64) })
		}, []check{flags(true, true, false), finding(CodeChainBreak), broken(INV005)}},
		{"session id differs in case", func(t *testing.T, s session) {
			rewriteManifest(t, s.sidecar, func(m *wire.Manifest) { m.SessionID = strings.ToUpper(m.SessionID) })
		}, []check{flags(true, true, false), finding(CodeSessionID)}},
		{"garbage after the last frame", func(t *testing.T, s session) {
			appendLine(t, seg(s), "garbage\n")
		}, []check{flags(true, true, false), broken(INV006)}},
		{"index removed", func(t *testing.T, s session) {
			os.Remove(store.IndexPath(s.sidecar))
		}, []check{flags(false, false, false), finding(CodeIndexMissing), broken(INV006)}},
		{"torn index", func(t *testing.T, s session) {
			fi, _ := os.Stat(store.IndexPath(s.sidecar))
			fixtures.Truncate(t, store.IndexPath(s.sidecar), fi.Size()-5)
		}, []check{flags(false, false, false), finding(CodeIndexTorn), broken(INV002)}},
		{"pending rollback intent", func(t *testing.T, s session) {
			os.WriteFile(RollbackIntentPath(s.sidecar), []byte("{}"), 0o600)
		}, []check{finding(CodeRollbackIntent), broken(INV007)}},
		{"segment mode 0644", func(t *testing.T, s session) {
			os.Chmod(seg(s), 0o644)
		}, []check{flags(true, true, false), finding(CodeMode)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, "accept/tricky")
			build(t, s.path, s.sidecar, 0)
			tc.damage(t, s)
			rep := against(t, s.path, s.sidecar, Options{})
			if rep.Verified() {
				t.Fatal("damaged store verified")
			}
			for _, c := range tc.checks {
				c(t, rep)
			}
		})
	}
}

func TestAgainstSourceStagingName(t *testing.T) {
	s := newSession(t, "accept/tricky")
	staging := s.sidecar + ".staging.0123456789abcdef0123456789abcdef"
	build(t, s.path, staging, 0)
	if rep := against(t, s.path, staging, Options{Staging: true}); !rep.Verified() {
		t.Fatalf("staging store: %v", rep.Findings)
	}
	rep := against(t, s.path, staging, Options{})
	if i := rep.Invariants[INV007]; i.Holds || i.Finding.Code != CodeStaging {
		t.Fatalf("INV-007 of a staging dir taken for a sidecar: %+v", i)
	}
}

func TestAgainstSourceTypedPayload(t *testing.T) {
	// A frame whose payload is valid JSON with a right digest but not an
	// entry the reference's model accepts: rebuild the store from it.
	s := newSession(t, "accept/tricky")
	w, err := store.Create(s.sidecar, store.Options{Clock: fixed})
	if err != nil {
		t.Fatal(err)
	}
	src := openSrc(t, s.path)
	for i := 0; ; i++ {
		e, err := src.Next()
		if err != nil {
			break
		}
		p := e.Payload
		if i == 1 {
			p = bytes.Replace(p, []byte(`"type":"`), []byte(`"type":"x`), 1)
		}
		if _, err := w.Append(e.ID, e.ParentID, e.Type, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.WriteManifest(src.Header().ID, "jsonl_v3"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rep := against(t, s.path, s.sidecar, Options{})
	if rep.Verification.IndexConsistent || !hasCode(rep.Findings, CodePayloadTyped) || rep.Invariants[INV001].Holds {
		t.Fatalf("typed payload: %+v %v", rep.Verification, rep.Findings)
	}
}

// refusingSource is a source the reader refuses after n entries.
type refusingSource struct {
	readers.Source
	n int
}

func (r *refusingSource) Next() (readers.Entry, error) {
	if r.n == 0 {
		return readers.Entry{}, &readers.RefusedError{Path: "/s.jsonl", Line: 7, Class: readers.ClassMalformedJSON, Reason: "cut"}
	}
	r.n--
	return r.Source.Next()
}

type failingSource struct{ readers.Source }

func (failingSource) Next() (readers.Entry, error) { return readers.Entry{}, syscall.EIO }

func TestAgainstSourceRefusedSource(t *testing.T) {
	s := newSession(t, "accept/tricky")
	build(t, s.path, s.sidecar, 0)
	rep, err := AgainstSource(context.Background(), &refusingSource{openSrc(t, s.path), 2}, s.sidecar, Options{SourcePath: s.path})
	if err != nil {
		t.Fatal(err)
	}
	want := wire.Verification{IndexConsistent: true}
	if rep.Verification != want || !hasCode(rep.Findings, "source.malformed_json") {
		t.Fatalf("verification %+v findings %v", rep.Verification, rep.Findings)
	}
	if _, err := AgainstSource(context.Background(), failingSource{openSrc(t, s.path)}, s.sidecar, Options{}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("an I/O error reading the source: %v", err)
	}
}

func TestAgainstSourceContext(t *testing.T) {
	s := newSession(t, "accept/tricky")
	build(t, s.path, s.sidecar, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := AgainstSource(ctx, openSrc(t, s.path), s.sidecar, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestVerified(t *testing.T) {
	if (Passed{}).Valid() {
		t.Fatal("the zero Passed is valid")
	}
	s := newSession(t, "accept/rollover")
	staging := s.sidecar + ".staging.0123456789abcdef0123456789abcdef"
	fp, err := Fingerprint(s.path)
	if err != nil {
		t.Fatal(err)
	}
	build(t, s.path, staging, 4096)
	p, rep, err := Verified(context.Background(), openSrc(t, s.path), staging, s.path, Options{Fingerprint: &fp})
	if err != nil || !p.Valid() {
		t.Fatalf("Verified: %v %v", err, rep.Findings)
	}
	if p.StagingDir() != staging || p.SessionPath() != s.path || p.Fingerprint().SHA256 != fp.SHA256 ||
		p.Verification() != (wire.Verification{EntryCountMatch: true, HashChainMatch: true, IndexConsistent: true}) {
		t.Fatalf("passed %+v", p)
	}

	t.Run("no fingerprint", func(t *testing.T) {
		if _, _, err := Verified(context.Background(), openSrc(t, s.path), staging, s.path, Options{}); err == nil {
			t.Fatal("Verified without a fingerprint")
		}
	})
	t.Run("source changed since the fingerprint", func(t *testing.T) {
		src := openSrc(t, s.path)
		old := fp
		old.SHA256 = strings.Repeat("0", 64)
		p, rep, err := Verified(context.Background(), src, staging, s.path, Options{Fingerprint: &old})
		if p.Valid() || !errors.Is(err, ErrNotVerified) || !hasCode(rep.Findings, CodeSourceChanged) {
			t.Fatalf("passed %v err %v findings %v", p.Valid(), err, rep.Findings)
		}
	})
	t.Run("acceptance finding", func(t *testing.T) {
		os.Chmod(store.IndexPath(staging), 0o640)
		defer os.Chmod(store.IndexPath(staging), 0o600)
		p, rep, err := Verified(context.Background(), openSrc(t, s.path), staging, s.path, Options{Fingerprint: &fp})
		if p.Valid() || !errors.Is(err, ErrNotVerified) || !hasCode(rep.Findings, CodeMode) {
			t.Fatalf("passed %v err %v findings %v", p.Valid(), err, rep.Findings)
		}
	})
	t.Run("foreign owner", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root")
		}
		os.Chown(s.path, 65534, 65534)
		defer os.Chown(s.path, 0, 0)
		fp2, _ := Fingerprint(s.path)
		p, rep, err := Verified(context.Background(), openSrc(t, s.path), staging, s.path, Options{Fingerprint: &fp2})
		if p.Valid() || !errors.Is(err, ErrNotVerified) || !hasCode(rep.Findings, CodeOwner) {
			t.Fatalf("passed %v err %v findings %v", p.Valid(), err, codes(rep.Findings))
		}
	})
}

func TestAgainstSourceCheckpoints(t *testing.T) {
	s := newSession(t, "accept/tricky")
	src := openSrc(t, s.path)
	w, err := store.Create(s.sidecar, store.Options{Clock: fixed})
	if err != nil {
		t.Fatal(err)
	}
	var cp wire.Checkpoint
	for i := 0; ; i++ {
		e, err := src.Next()
		if err != nil {
			break
		}
		if _, err := w.Append(e.ID, e.ParentID, e.Type, e.Payload); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if cp, err = w.WriteCheckpoint(wire.ReasonManual); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := w.WriteManifest(src.Header().ID, "jsonl_v3"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if rep := against(t, s.path, s.sidecar, Options{}); !rep.Verified() || len(rep.Findings) != 0 {
		t.Fatalf("with a checkpoint: %v", rep.Findings)
	}
	path := store.CheckpointPath(s.sidecar, cp.CheckpointSeq)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(b, []byte(cp.ChainHash), []byte(strings.Repeat("b", 64)), 1), 0o600)
	rep := against(t, s.path, s.sidecar, Options{})
	if i := rep.Invariants[INV004]; i.Holds || i.Finding == nil || i.Finding.Code != CodeCheckpoint {
		t.Fatalf("INV-004 %+v; findings %v", i, rep.Findings)
	}
}

// TestParentLinks: a store whose frames name a parent it lacks, or whose
// links form a cycle, is reported (INV-001), naming the entries.
func TestParentLinks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent func(i int, ids []string) string // the parent written for entry i
		want   string
	}{
		{"missing", func(i int, ids []string) string {
			if i == 2 {
				return "gone-parent"
			}
			return ""
		}, `names parent "gone-parent"`},
		{"cycle", func(i int, ids []string) string {
			switch i {
			case 1:
				return ids[2]
			case 2:
				return ids[1]
			}
			return ""
		}, "the parent links form a cycle through entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, "accept/tricky")
			var entries []readers.Entry
			src := openSrc(t, s.path)
			for {
				e, err := src.Next()
				if err != nil {
					break
				}
				e.Payload = append([]byte(nil), e.Payload...)
				entries = append(entries, e)
			}
			if len(entries) < 3 {
				t.Fatalf("the vector has %d entries", len(entries))
			}
			ids := make([]string, len(entries))
			for i, e := range entries {
				ids[i] = e.ID
			}
			w, err := store.Create(s.sidecar, store.Options{Clock: fixed})
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range entries {
				if _, err := w.Append(e.ID, tc.parent(i, ids), e.Type, e.Payload); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			rep, err := AgainstSource(context.Background(), openSrc(t, s.path), s.sidecar, Options{SourcePath: s.path})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range rep.Findings {
				if f.Code == CodeParents {
					if !strings.Contains(f.Detail, tc.want) {
						t.Fatalf("finding %q, want one containing %q", f.Detail, tc.want)
					}
					return
				}
			}
			t.Fatalf("no %s finding among %v", CodeParents, codes(rep.Findings))
		})
	}
}
