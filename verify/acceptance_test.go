package verify

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pisess/writers/store"
	"pisess/writers/wire"
)

const (
	trickyID = "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b"
	mib64    = 64 << 20
)

// acceptOpts are the options of the tricky session, owned by us.
func acceptOpts() AcceptOptions {
	o := me()
	o.HeaderID = trickyID
	return o
}

func TestAcceptanceOfAGoodStore(t *testing.T) {
	s := newSession(t, "accept/tricky")
	migrate(t, s)
	if f := Acceptance(s.sidecar, s.path, acceptOpts()); len(f) != 0 {
		t.Fatalf("findings: %v", f)
	}
	// *.seg.bak files are set aside by repairs: ignored.
	seg := store.SegmentPath(s.sidecar, 1)
	b, _ := os.ReadFile(seg)
	os.WriteFile(seg+".bak", b, 0o600)
	os.WriteFile(seg+".bak.1", b, 0o600)
	if f := Acceptance(s.sidecar, s.path, acceptOpts()); len(f) != 0 {
		t.Fatalf("with .seg.bak: %v", f)
	}
}

// Each acceptance rule of FORMAT.md §11, broken on purpose.
func TestAcceptanceRules(t *testing.T) {
	seg1 := func(s session) string { return store.SegmentPath(s.sidecar, 1) }
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, s session) AcceptOptions
		code   string
		class  Class
	}{
		{"0644 file", func(t *testing.T, s session) AcceptOptions {
			os.Chmod(seg1(s), 0o644)
			return acceptOpts()
		}, CodeMode, ClassCorrupt},
		{"0755 directory", func(t *testing.T, s session) AcceptOptions {
			os.Chmod(filepath.Join(s.sidecar, store.IndexDir), 0o755)
			return acceptOpts()
		}, CodeMode, ClassCorrupt},
		{"0755 root", func(t *testing.T, s session) AcceptOptions {
			os.Chmod(s.sidecar, 0o755)
			return acceptOpts()
		}, CodeMode, ClassCorrupt},
		{"0400 file: pi could not write it", func(t *testing.T, s session) AcceptOptions {
			os.Chmod(store.SourceStatePath(s.sidecar), 0o400)
			return acceptOpts()
		}, CodeMode, ClassCorrupt},
		{"symlinked ancestor", func(t *testing.T, s session) AcceptOptions {
			return acceptOpts() // see below: the store is reached through a link
		}, CodeSymlinkAncestor, ClassCorrupt},
		{"symlink inside", func(t *testing.T, s session) AcceptOptions {
			os.Symlink(seg1(s), filepath.Join(s.sidecar, "tmp", "x"))
			return acceptOpts()
		}, CodeSymlink, ClassCorrupt},
		{"segment is a symlink", func(t *testing.T, s session) AcceptOptions {
			os.Rename(seg1(s), filepath.Join(s.sidecar, "seg"))
			os.Symlink(filepath.Join(s.sidecar, "seg"), seg1(s))
			return acceptOpts()
		}, CodeSymlink, ClassCorrupt},
		{"special file", func(t *testing.T, s session) AcceptOptions {
			syscall.Mkfifo(filepath.Join(s.sidecar, "tmp", "fifo"), 0o600)
			return acceptOpts()
		}, CodeSpecialFile, ClassCorrupt},
		{"unindexed segment", func(t *testing.T, s session) AcceptOptions {
			b, _ := os.ReadFile(seg1(s))
			os.WriteFile(store.SegmentPath(s.sidecar, 9), b, 0o600)
			return acceptOpts()
		}, CodeUnindexedSegment, ClassCorrupt},
		{"empty unindexed segment", func(t *testing.T, s session) AcceptOptions {
			os.WriteFile(store.SegmentPath(s.sidecar, 2), nil, 0o600)
			return acceptOpts()
		}, CodeUnindexedSegment, ClassCorrupt},
		{"non-numeric segment name", func(t *testing.T, s session) AcceptOptions {
			os.WriteFile(filepath.Join(s.sidecar, store.SegmentsDir, "abc.seg"), nil, 0o600)
			return acceptOpts()
		}, CodeUnindexedSegment, ClassCorrupt},
		{"state other than active", func(t *testing.T, s session) AcceptOptions {
			b, _ := os.ReadFile(store.IndexPath(s.sidecar))
			b = bytes.Replace(b, []byte(`"state":"active"`), []byte(`"state":"compacted"`), 1)
			os.WriteFile(store.IndexPath(s.sidecar), b, 0o600)
			return acceptOpts()
		}, CodeState, ClassCorrupt},
		{"index line without LF", func(t *testing.T, s session) AcceptOptions {
			b, _ := os.ReadFile(store.IndexPath(s.sidecar))
			os.WriteFile(store.IndexPath(s.sidecar), b[:len(b)-1], 0o600)
			return acceptOpts()
		}, CodeIndexTorn, ClassCorrupt},
		{"unknown index member", func(t *testing.T, s session) AcceptOptions {
			b, _ := os.ReadFile(store.IndexPath(s.sidecar))
			b = bytes.Replace(b, []byte(`"state":"active"`), []byte(`"state":"active","x":1`), 1)
			os.WriteFile(store.IndexPath(s.sidecar), b, 0o600)
			return acceptOpts()
		}, CodeIndexInvalid, ClassCorrupt},
		{"segment over 64 MiB", func(t *testing.T, s session) AcceptOptions {
			// Sparse: the size is what pi checks.
			if err := os.Truncate(seg1(s), mib64+1); err != nil {
				t.Fatal(err)
			}
			return acceptOpts()
		}, CodeSegmentSize, ClassCorrupt},
		{"sessionId differs in case", func(t *testing.T, s session) AcceptOptions {
			rewriteManifest(t, s.sidecar, func(m *wire.Manifest) { m.SessionID = strings.ToUpper(m.SessionID) })
			return acceptOpts()
		}, CodeSessionID, ClassCorrupt},
		{"sourceFormat", func(t *testing.T, s session) AcceptOptions {
			rewriteManifest(t, s.sidecar, func(m *wire.Manifest) { m.SourceFormat = wire.FormatSQLitev1 })
			return acceptOpts()
		}, CodeSourceFormat, ClassCorrupt},
		{"manifest resume facts", func(t *testing.T, s session) AcceptOptions {
			rewriteManifest(t, s.sidecar, func(m *wire.Manifest) { m.Counters.BytesTotal++ })
			return acceptOpts()
		}, CodeManifestMismatch, ClassCorrupt},
		{"manifest invariant false", func(t *testing.T, s session) AcceptOptions {
			rewriteManifest(t, s.sidecar, func(m *wire.Manifest) { m.Invariants.CheckpointsMonotonic = false })
			return acceptOpts()
		}, CodeManifestInvariant, ClassCorrupt},
		{"missing manifest", func(t *testing.T, s session) AcceptOptions {
			os.Remove(store.ManifestPath(s.sidecar))
			return acceptOpts()
		}, CodeManifestMissing, ClassCorrupt},
		{"missing segments/", func(t *testing.T, s session) AcceptOptions {
			os.RemoveAll(store.SegmentsPath(s.sidecar))
			os.Remove(store.IndexPath(s.sidecar))
			return acceptOpts()
		}, CodeMissing, ClassPartial},
		{"pending rollback intent", func(t *testing.T, s session) AcceptOptions {
			os.WriteFile(RollbackIntentPath(s.sidecar), []byte("{}"), 0o600)
			return acceptOpts()
		}, CodeRollbackIntent, ClassCorrupt},
		{"foreign owner", func(t *testing.T, s session) AcceptOptions {
			if os.Geteuid() != 0 {
				t.Skip("needs root to chown")
			}
			if err := os.Chown(seg1(s), 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return acceptOpts()
		}, CodeOwner, ClassCorrupt},
		{"store owned by root, session by a user", func(t *testing.T, s session) AcceptOptions {
			o := acceptOpts()
			o.OwnerUID, o.OwnerGID = 65534, 65534
			return o
		}, CodeOwner, ClassCorrupt},
		{"sidecar is a file", func(t *testing.T, s session) AcceptOptions {
			os.RemoveAll(s.sidecar)
			os.WriteFile(s.sidecar, nil, 0o600)
			return acceptOpts()
		}, CodeNotDirectory, ClassCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, "accept/tricky")
			migrate(t, s)
			opt := tc.damage(t, s)
			dir := s.sidecar
			if tc.code == CodeSymlinkAncestor {
				link := filepath.Join(t.TempDir(), "link")
				os.Symlink(s.tree, link)
				dir = filepath.Join(link, rel(s.tree, s.sidecar))
			}
			got := Acceptance(dir, s.path, opt)
			var f *Finding
			for i := range got {
				if got[i].Code == tc.code {
					f = &got[i]
					break
				}
			}
			if f == nil {
				t.Fatalf("no %s finding in %v", tc.code, got)
			}
			if f.Class != tc.class || f.Path == "" || f.Repair == "" || f.Session != s.path {
				t.Errorf("finding %+v: want class %s, a path, a repair and the session", *f, tc.class)
			}
			if tc.code == CodeSymlinkAncestor && !strings.HasPrefix(f.Repair, "cannot repair: move the tree out from under the symlink") {
				t.Errorf("repair %q", f.Repair)
			}
			if tc.code == CodeSessionID && !strings.Contains(f.Detail, "differ in case") {
				t.Errorf("detail %q", f.Detail)
			}
		})
	}
}

func TestFromProblemCoversEveryClass(t *testing.T) {
	root := "/s.v2"
	for _, c := range []store.Class{store.ClassMissingFile, store.ClassTornTail, store.ClassCRCMismatch,
		store.ClassIndexOutOfBounds, store.ClassIndexLagging, store.ClassChainBreak, store.ClassManifestMismatch,
		store.ClassInvariantFalse, store.ClassBadDocument, store.ClassUnindexedSegment} {
		f, ok := fromProblem(root, mib64, store.Problem{Class: c, Path: root + "/manifest.json"})
		if !ok || f.Code == "" || f.Code == CodeStoreOther || f.Repair == "" {
			t.Errorf("%s: %+v %v", c, f, ok)
		}
	}
	for _, c := range []store.Class{store.ClassBadMode, store.ClassSymlink} {
		if _, ok := fromProblem(root, mib64, store.Problem{Class: c, Path: root}); ok {
			t.Errorf("%s is walkStore's to report", c)
		}
	}
	f, _ := fromProblem(root, mib64, store.Problem{Class: store.ClassTornTail, Path: root + "/migrations/ledger.jsonl"})
	if f.Code != CodeLedgerTorn || f.Class != "" {
		t.Errorf("a torn ledger changes no status class: %+v", f)
	}
}

// TestSeeNames: the names a caller vouches for are each looked at and
// checked as the walk checks them (a loose mode is found), and one that is
// gone is a finding; the store's own listing, as the walk gives it, has
// none.
func TestSeeNames(t *testing.T) {
	s := newSession(t, "accept/tricky")
	migrate(t, s)
	var walked []string
	var out findings
	fi, err := os.Lstat(s.sidecar)
	if err != nil {
		t.Fatal(err)
	}
	walkStoreSeeing(&out, s.sidecar, s.sidecar, fi, me(), func(path string) {
		rel, _ := filepath.Rel(s.sidecar, path)
		if rel == "." {
			rel = ""
		}
		walked = append(walked, filepath.ToSlash(rel))
	})
	if len(out.list) != 0 || len(walked) < 5 {
		t.Fatalf("walk: %d names, findings %v", len(walked), codes(out.list))
	}
	seeNames(&out, s.sidecar, walked, me())
	if len(out.list) != 0 {
		t.Fatalf("the walk's own names: %v", codes(out.list))
	}
	if err := os.Chmod(store.ManifestPath(s.sidecar), 0o644); err != nil {
		t.Fatal(err)
	}
	seeNames(&out, s.sidecar, append(walked, "segments/0000000000000009.seg"), me())
	if !hasCode(out.list, CodeMode) || !hasCode(out.list, CodeUnreadable) {
		t.Fatalf("a loose manifest and a missing segment: %v", codes(out.list))
	}
}
