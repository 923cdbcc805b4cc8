package verify

import (
	"os"
	"path/filepath"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// One real session and sidecar per status class, as the reference's
// rules (FORMAT.md §9) classify them.
func TestStatusClasses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s session)
		class Class
		code  string // a finding that must be there ("" for none at all)
		fast  Class  // StatusFast's verdict, when it differs ("": the same)
	}{
		{"unmigrated", func(t *testing.T, s session) {}, ClassUnmigrated, "", ""},
		{"migrated", func(t *testing.T, s session) { migrate(t, s) }, ClassMigrated, "", ""},
		{"migrated, no source-state: verified against the source", func(t *testing.T, s session) {
			build(t, s.path, s.sidecar, 0)
		}, ClassMigrated, "", ""},
		{"stale: dirty", func(t *testing.T, s session) {
			migrate(t, s)
			writeState(t, s.sidecar, wire.SourceState{State: wire.SourceDirty})
		}, ClassStale, CodeSourceStale, ""},
		{"stale: appended after the migration", func(t *testing.T, s session) {
			migrate(t, s)
			appendLine(t, s.path, `{"type":"label","id":"ffff0001","parentId":"a1b2c3d4","timestamp":"2026-01-05T10:09:00.000Z","targetId":"a1b2c3d4","label":"new"}`+"\n")
		}, ClassStale, CodeSourceStale, ""},
		{"stale: no source-state and the source moved on", func(t *testing.T, s session) {
			build(t, s.path, s.sidecar, 0)
			appendLine(t, s.path, `{"type":"label","id":"ffff0001","parentId":"a1b2c3d4","timestamp":"2026-01-05T10:09:00.000Z","targetId":"a1b2c3d4","label":"new"}`+"\n")
		}, ClassStale, CodeEntriesSource, ""},
		{"corrupt: flipped frame byte", func(t *testing.T, s session) {
			migrate(t, s)
			fixtures.FlipByte(t, store.SegmentPath(s.sidecar, 1), 200)
		}, ClassCorrupt, CodeIndexCRC, ClassMigrated},
		{"corrupt: 0644 segment", func(t *testing.T, s session) {
			migrate(t, s)
			os.Chmod(store.SegmentPath(s.sidecar, 1), 0o644)
		}, ClassCorrupt, CodeMode, ""},
		{"corrupt: 0755 root", func(t *testing.T, s session) {
			migrate(t, s)
			os.Chmod(s.sidecar, 0o755)
		}, ClassCorrupt, CodeMode, ""},
		{"corrupt: invalid source-state", func(t *testing.T, s session) {
			migrate(t, s)
			os.WriteFile(store.SourceStatePath(s.sidecar), []byte("{"), 0o600)
		}, ClassCorrupt, CodeSourceStateInvalid, ""},
		{"corrupt: missing manifest", func(t *testing.T, s session) {
			migrate(t, s)
			os.Remove(store.ManifestPath(s.sidecar))
		}, ClassCorrupt, CodeManifestMissing, ""},
		{"corrupt: session id differs in case", func(t *testing.T, s session) {
			migrate(t, s)
			rewriteManifest(t, s.sidecar, func(m *wire.Manifest) {
				m.SessionID = "3F2B8C1E-9A4D-4E6F-8B2A-1C5D7E9F0A1B"
			})
		}, ClassCorrupt, CodeSessionID, ""},
		{"corrupt: symlink inside", func(t *testing.T, s session) {
			migrate(t, s)
			os.Symlink("/etc/passwd", filepath.Join(s.sidecar, "tmp", "x"))
		}, ClassCorrupt, CodeSymlink, ""},
		{"corrupt: source header not version 3", func(t *testing.T, s session) {
			migrate(t, s)
			b, _ := os.ReadFile(s.path)
			os.WriteFile(s.path, append([]byte(`{"type":"session","version":2,"id":"`+trickyID+`","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/home/u/proj"}`), b[bytesIndex(b, '\n'):]...), 0o600)
		}, ClassCorrupt, "source.unsupported_version", ""},
		{"corrupt beats partial: symlink and no segments/", func(t *testing.T, s session) {
			migrate(t, s)
			os.RemoveAll(store.SegmentsPath(s.sidecar))
			os.Symlink("/etc/passwd", filepath.Join(s.sidecar, "tmp", "x"))
		}, ClassCorrupt, CodeSymlink, ""},
		{"partial: no segments/", func(t *testing.T, s session) {
			migrate(t, s)
			os.RemoveAll(store.SegmentsPath(s.sidecar))
		}, ClassPartial, CodeMissing, ""},
		{"partial: no index while the source has entries", func(t *testing.T, s session) {
			migrate(t, s)
			os.Remove(store.IndexPath(s.sidecar))
		}, ClassPartial, CodeIndexMissing, ""},
		{"partial: an empty sidecar directory", func(t *testing.T, s session) {
			os.Mkdir(s.sidecar, 0o700)
		}, ClassPartial, CodeMissing, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, "accept/tricky")
			tc.setup(t, s)
			rep, err := Status(s.path)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Class != tc.class {
				t.Fatalf("class %s, want %s; findings %v", rep.Class, tc.class, rep.Findings)
			}
			if tc.code == "" && len(rep.Findings) != 0 {
				t.Fatalf("findings %v", rep.Findings)
			}
			if tc.code != "" && !hasCode(rep.Findings, tc.code) {
				t.Fatalf("no %s in %v", tc.code, rep.Findings)
			}
			if rep.Session != s.path || rep.Sidecar != s.sidecar || rep.SourceFormat != readers.FormatJSONLv3 {
				t.Fatalf("report %+v", rep)
			}
			if tc.class == ClassMigrated {
				if rep.Entries == 0 || rep.Bytes == 0 || rep.Version != 3 || rep.Name == nil || *rep.Name == "" {
					t.Fatalf("counts %d %d version %d name %v", rep.Entries, rep.Bytes, rep.Version, rep.Name)
				}
			}
			fast, err := StatusFast(s.path)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.class
			if tc.fast != "" {
				want = tc.fast // damage inside frames or the tree is beyond what it reads
			}
			if fast.Class != want {
				t.Fatalf("StatusFast class %s, want %s; findings %v", fast.Class, want, fast.Findings)
			}
		})
	}
}

func TestStatusForeignOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	s := newSession(t, "accept/tricky")
	migrate(t, s)
	os.Chown(s.path, 65534, 65534) // the store stays root's: pi's open would fail
	rep, err := Status(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Class != ClassCorrupt || !hasCode(rep.Findings, CodeOwner) {
		t.Fatalf("class %s findings %v", rep.Class, rep.Findings)
	}
}

func TestStatusMissingSession(t *testing.T) {
	if _, err := Status(filepath.Join(t.TempDir(), "nope.jsonl")); err == nil {
		t.Fatal("status of a missing session file")
	}
}

func bytesIndex(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return len(b)
}
