package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"pisess/readers"
	"pisess/readers/jsonl"
	"pisess/writers/durable"
)

// v1Session is a version-1 session: no version, no ids, two identical
// messages (so the legacy id counter moves), a compaction pointing back.
const v1Session = `{"type":"session","id":"7c1d2e3f-0000-4000-8000-000000000001","timestamp":"2025-06-01T00:00:00.000Z","cwd":"/x"}
{"type":"message","timestamp":"2025-06-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}
{"type":"message","timestamp":"2025-06-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}
{"type":"model_change","timestamp":"2025-06-01T00:00:03.000Z","provider":"anthropic","modelId":"m"}
{"type":"compaction","timestamp":"2025-06-01T00:00:04.000Z","summary":"s","firstKeptEntryIndex":2,"tokensBefore":5}
{"type":"message","timestamp":"2025-06-01T00:00:05.000Z","message":{"role":"hookMessage","customType":"c","content":"hook","display":true,"timestamp":5}}
`

// sessionTree writes content as a session in a fresh tree and returns the
// tree and the file.
func sessionTree(tb testing.TB, content string) (tree, path string) {
	tb.Helper()
	tree = tb.TempDir()
	path = writeFile(tb, filepath.Join(tree, "--x--", "2025-06-01T00-00-00-000Z_s.jsonl"), content)
	return tree, path
}

func TestUpgradeV1(t *testing.T) {
	tree, path := sessionTree(t, v1Session)
	before := treeDigest(t, tree)

	dry := run(t, path, Options{DryRun: true})
	if dry.Status != StatusPlanned {
		t.Fatalf("dry run: %s %+v", dry.Status, dry.Problem)
	}
	if after := treeDigest(t, tree); after != before {
		t.Fatalf("the dry run changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	rec := &recorder{}
	opt := options(t, tree, path, rec)
	res := run(t, path, opt)
	if res.Status != StatusUpgraded {
		t.Fatalf("upgrade: %s %+v", res.Status, res.Problem)
	}
	got := readFile(t, path)

	// The dry run showed exactly what was written.
	dryJSON, _ := json.Marshal(dry.IDs)
	resJSON, _ := json.Marshal(res.IDs)
	if string(dryJSON) != string(resJSON) || dry.NewSHA256 != res.NewSHA256 || dry.NewSize != res.NewSize ||
		!bytes.Equal(dry.NewHeader, res.NewHeader) || !reflect.DeepEqual(dry.RolesRenamed, res.RolesRenamed) {
		t.Errorf("dry run and real run differ:\ndry  %s %s\nreal %s %s", dryJSON, dry.NewSHA256, resJSON, res.NewSHA256)
	}
	if sha(got) != res.NewSHA256 || int64(len(got)) != res.NewSize {
		t.Errorf("newSha256/newSize do not describe the file")
	}

	ids := make([]string, len(res.IDs))
	for i, a := range res.IDs {
		ids[i] = a.ID
	}
	want := `{"type":"session","id":"7c1d2e3f-0000-4000-8000-000000000001","timestamp":"2025-06-01T00:00:00.000Z","cwd":"/x","version":3}
{"type":"message","timestamp":"2025-06-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1},"id":"` + ids[0] + `","parentId":null}
{"type":"message","timestamp":"2025-06-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1},"id":"` + ids[1] + `","parentId":"` + ids[0] + `"}
{"type":"model_change","timestamp":"2025-06-01T00:00:03.000Z","provider":"anthropic","modelId":"m","id":"` + ids[2] + `","parentId":"` + ids[1] + `"}
{"type":"compaction","timestamp":"2025-06-01T00:00:04.000Z","summary":"s","tokensBefore":5,"id":"` + ids[3] + `","parentId":"` + ids[2] + `","firstKeptEntryId":"` + ids[1] + `"}
{"type":"message","timestamp":"2025-06-01T00:00:05.000Z","message":{"role":"custom","customType":"c","content":"hook","display":true,"timestamp":5},"id":"` + ids[4] + `","parentId":"` + ids[3] + `"}
`
	if string(got) != want {
		t.Errorf("upgraded file:\n%s\nwant:\n%s", got, want)
	}
	if ids[0] == ids[1] {
		t.Errorf("identical entries got the same id")
	}
	if !res.IDs[3].Untyped || res.IDs[0].Untyped {
		t.Errorf("untyped flags: %+v", res.IDs)
	}

	// The ids of the entries the reference can read are the ones its
	// reader synthesizes for the v1 file (here: before the compaction).
	legacy := writeFile(t, filepath.Join(t.TempDir(), "v1.jsonl"), strings.Join(strings.Split(v1Session, "\n")[:4], "\n")+"\n")
	src, err := jsonl.Open(legacy, jsonl.Options{AllowLegacy: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		e, err := src.Next()
		if err != nil || !e.SynthesizedID || e.ID != ids[i] {
			t.Errorf("entry %d: jsonl synthesizes %q (%v), the upgrade wrote %q", i, e.ID, err, ids[i])
		}
	}
	src.Close()

	// The original is quarantined byte for byte, 0600, and journaled.
	q := readFile(t, opt.QuarantinePath)
	if string(q) != v1Session || res.Quarantine != opt.QuarantinePath {
		t.Errorf("quarantine copy differs from the original")
	}
	if fi, _ := os.Stat(opt.QuarantinePath); fi.Mode().Perm() != 0o600 {
		t.Errorf("quarantine mode %v", fi.Mode())
	}
	for d := filepath.Dir(opt.QuarantinePath); d != tree; d = filepath.Dir(d) {
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", d, fi.Mode())
		}
	}
	wantEvent := Event{Kind: EventUpgraded, Path: path, QuarantinePath: opt.QuarantinePath,
		SHA256: sha([]byte(v1Session)), NewSHA256: sha(got)}
	if len(rec.events) != 1 {
		t.Fatalf("events %+v", rec.events)
	}
	e := rec.events[0]
	e.Detail = ""
	if e != wantEvent {
		t.Errorf("event %+v, want %+v", e, wantEvent)
	}
	if res.Reference == nil || !res.Reference.Migratable {
		t.Errorf("reference: %+v", res.Reference)
	}
	leftovers(t, filepath.Dir(path))

	// A second upgrade is a no-op.
	again := run(t, path, options(t, tree, path, rec))
	if again.Status != StatusCurrent || !bytes.Equal(readFile(t, path), got) || len(rec.events) != 1 {
		t.Errorf("second upgrade: %s %+v", again.Status, again.Problem)
	}
}

// leftovers fails when an upgrade left a temp file in dir.
func leftovers(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("leftover %s", e.Name())
		}
	}
}

func TestUpgradeKeepsModeAndIsReadByTheReference(t *testing.T) {
	tree, path := sessionTree(t, strings.Join(strings.Split(v1Session, "\n")[:4], "\n")+"\n")
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	res := run(t, path, options(t, tree, path, &recorder{}))
	if res.Status != StatusUpgraded || !res.Reference.Migratable {
		t.Fatalf("%s %+v %+v", res.Status, res.Problem, res.Reference)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode())
	}
	src, err := jsonl.Open(path, jsonl.Options{})
	if err != nil {
		t.Fatalf("the reference's reader refuses the upgraded file: %v", err)
	}
	defer src.Close()
	for i := 0; ; i++ {
		e, err := src.Next()
		if err != nil {
			break
		}
		if e.SynthesizedID || e.ID != res.IDs[i].ID {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
}

func TestUpgradeV2(t *testing.T) {
	content := `{"type":"session","version":2,"id":"v2","timestamp":"2026-02-01T00:00:00.000Z","cwd":"/p"}` + "\r\n" +
		`{"type":"message","id":"aaaa0003","parentId":null,"timestamp":"2026-02-01T00:00:01.000Z","message":{"role":"hookMessage","customType":"ext","content":"hi","display":true,"timestamp":1}}` + "\r\n\r\n" +
		`{"type":"message","id":"aaaa0004","parentId":"aaaa0003","timestamp":"2026-02-01T00:00:02.000Z","message":{"role":"user","content":"x","timestamp":2}}`
	tree, path := sessionTree(t, content)
	res := run(t, path, options(t, tree, path, &recorder{}))
	if res.Status != StatusUpgraded {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}
	want := `{"type":"session","version":3,"id":"v2","timestamp":"2026-02-01T00:00:00.000Z","cwd":"/p"}
{"type":"message","id":"aaaa0003","parentId":null,"timestamp":"2026-02-01T00:00:01.000Z","message":{"role":"custom","customType":"ext","content":"hi","display":true,"timestamp":1}}
{"type":"message","id":"aaaa0004","parentId":"aaaa0003","timestamp":"2026-02-01T00:00:02.000Z","message":{"role":"user","content":"x","timestamp":2}}
`
	if got := string(readFile(t, path)); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if res.CRLFLines != 2 || res.BlankLines != 1 || !res.NewlineAdded || len(res.IDs) != 0 ||
		!reflect.DeepEqual(res.RolesRenamed, []int64{2}) || !res.Reference.Migratable {
		t.Errorf("report: %+v %+v", res, res.Reference)
	}
}

// TestRefused: every line pi would drop or mangle refuses the file, with
// its line and class, and nothing at all is written.
func TestRefused(t *testing.T) {
	header := `{"type":"session","id":"s","timestamp":"t","cwd":"/c"}` + "\n"
	entry := `{"type":"message","timestamp":"t","message":{"role":"user","content":"x","timestamp":1}}` + "\n"
	cases := []struct {
		name    string
		content string
		line    int64
		class   readers.Class
	}{
		{"empty file", "", 0, readers.ClassEmptyFile},
		{"only blank lines", "\n \r\n", 0, readers.ClassEmptyFile},
		{"malformed middle line", header + entry + `{"type":"message",` + "\n" + entry, 3, readers.ClassMalformedJSON},
		{"torn last line", header + entry + `{"type":"message","times`, 3, readers.ClassTornLine},
		{"torn inside UTF-8", header + entry + "{\"type\":\"message\",\"x\":\"\xc3", 3, readers.ClassTornLine},
		{"invalid UTF-8", header + "{\"type\":\"message\",\"x\":\"\xff\"}\n", 2, readers.ClassInvalidUTF8},
		{"lone surrogate", header + `{"type":"message","x":"\ud83d"}` + "\n", 2, readers.ClassLoneSurrogate},
		{"number out of range", header + `{"type":"message","x":1e400}` + "\n", 2, readers.ClassMalformedJSON},
		{"too deep", header + `{"type":"message","x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "}\n", 2, readers.ClassMalformedJSON},
		{"not an object", header + entry + "[1,2]\n", 3, ClassNotObject},
		{"null line", header + "null\n", 2, ClassNotObject},
		{"first line not a header", entry + header, 1, readers.ClassBadHeader},
		{"header without string id", `{"type":"session","id":5}` + "\n" + entry, 1, readers.ClassBadHeader},
		{"version as string", `{"type":"session","version":"2","id":"s"}` + "\n" + entry, 1, readers.ClassUnsupportedVer},
		{"BOM not at the start", header + "\ufeff" + entry, 2, readers.ClassMalformedJSON},
		{"NBSP before JSON", header + "\u00a0" + entry, 2, readers.ClassMalformedJSON},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree, path := sessionTree(t, c.content)
			before := treeDigest(t, tree)
			for _, dry := range []bool{true, false} {
				opt := options(t, tree, path, &recorder{})
				opt.DryRun = dry
				res := run(t, path, opt)
				if res.Status != StatusRefused || res.Problem.Line != c.line || res.Problem.Class != c.class {
					t.Fatalf("dry=%v: %s %+v, want refused at line %d (%s)", dry, res.Status, res.Problem, c.line, c.class)
				}
			}
			// The real run took the session lock (creating <file>.lock,
			// as pi does) and wrote nothing else.
			if err := os.Remove(path + ".lock"); err != nil {
				t.Fatal(err)
			}
			if after := treeDigest(t, tree); !sameIgnoringDirTimes(before, after) {
				t.Errorf("the tree changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// sameIgnoringDirTimes compares tree digests but the directory that held
// the lock file, whose mtime the lock's creation and removal moved.
func sameIgnoringDirTimes(a, b string) bool {
	strip := func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(strings.Fields(l)[1], "d") {
				l = strings.Fields(l)[0]
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	}
	return strip(a) == strip(b)
}

func TestCurrent(t *testing.T) {
	tree, path := sessionTree(t, `{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/c"}`+"\n"+"not even json\n")
	before := treeDigest(t, tree)
	res := run(t, path, Options{DryRun: true})
	if res.Status != StatusCurrent || res.Version != 3 {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}
	if treeDigest(t, tree) != before {
		t.Errorf("tree changed")
	}
}

func TestBusy(t *testing.T) {
	tree, path := sessionTree(t, v1Session)
	held, err := durable.OS.LockFile(context.Background(), path+".lock", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	rec := &recorder{}
	opt := options(t, tree, path, rec)
	opt.LockTimeout = 50 * time.Millisecond
	res := run(t, path, opt)
	if res.Status != StatusBusy || res.Problem.Class != readers.ClassLocked {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}
	if string(readFile(t, path)) != v1Session || len(rec.events) != 0 {
		t.Errorf("a busy file was changed")
	}
	if _, err := os.Stat(filepath.Join(tree, ".pisess")); !os.IsNotExist(err) {
		t.Errorf(".pisess created for a busy file")
	}
}

func TestSymlinkRefused(t *testing.T) {
	tree, path := sessionTree(t, v1Session)
	link := filepath.Join(filepath.Dir(path), "link.jsonl")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	res := run(t, link, options(t, tree, link, &recorder{}))
	if res.Status != StatusRefused || res.Problem.Class != readers.ClassSymlink {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}
	if string(readFile(t, path)) != v1Session {
		t.Errorf("target changed")
	}
	if _, err := os.Lstat(link + ".lock"); !os.IsNotExist(err) {
		t.Errorf("a lock file was created beside the symlink")
	}
}

// TestChangedBetweenPasses: a writer appends between pass 1 and pass 2;
// the file is left exactly as that writer left it, nothing else remains.
func TestChangedBetweenPasses(t *testing.T) {
	tree, path := sessionTree(t, v1Session)
	appended := `{"type":"message","timestamp":"t","message":{"role":"user","content":"late","timestamp":9}}` + "\n"
	for _, dry := range []bool{true, false} {
		rec := &recorder{}
		opt := options(t, tree, path, rec)
		opt.DryRun = dry
		opt.hooks.afterPass1 = func() { appendTo(t, path, appended) }
		res := run(t, path, opt)
		if res.Status != StatusChanged {
			t.Fatalf("dry=%v: %s %+v", dry, res.Status, res.Problem)
		}
		if len(rec.events) != 0 {
			t.Errorf("journaled: %+v", rec.events)
		}
	}
	if got := string(readFile(t, path)); got != v1Session+appended+appended {
		t.Errorf("file:\n%s", got)
	}
	leftovers(t, filepath.Dir(path))
	if _, err := os.Stat(filepath.Join(tree, ".pisess", "quarantine", testCorrelationID, "--x--")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(tree, ".pisess", "quarantine", testCorrelationID, "--x--"))
		if len(entries) != 0 {
			t.Errorf("quarantine holds %v", entries)
		}
	}
}

// TestChangedAfterTheLastCheck: a writer that takes no lock appends after
// the fingerprint check, before the rename: its version is put back.
func TestChangedAfterTheLastCheck(t *testing.T) {
	tree, path := sessionTree(t, v1Session)
	appended := `{"type":"message","timestamp":"t","message":{"role":"user","content":"late","timestamp":9}}` + "\n"
	rec := &recorder{}
	opt := options(t, tree, path, rec)
	opt.hooks.afterRecord = func() { appendTo(t, path, appended) }
	res := run(t, path, opt)
	if res.Status != StatusChanged || !res.RestoredAfter {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}
	if got := string(readFile(t, path)); got != v1Session+appended {
		t.Errorf("file:\n%s", got)
	}
	if len(rec.events) != 2 || rec.events[0].Kind != EventUpgraded || rec.events[1].Kind != EventRestored ||
		rec.events[1].SHA256 != sha([]byte(v1Session+appended)) {
		t.Errorf("events %+v", rec.events)
	}
	if string(readFile(t, opt.QuarantinePath)) != v1Session {
		t.Errorf("quarantine copy")
	}
	leftovers(t, filepath.Dir(path))
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestQuarantineReuse: a re-run with the same correlation id (after a
// crash before the rename) finds its own copy and reuses it; a copy with
// other bytes is never overwritten.
func TestQuarantineReuse(t *testing.T) {
	tree, path := sessionTree(t, v1Session)
	opt := options(t, tree, path, &recorder{})
	writeFile(t, opt.QuarantinePath, v1Session)
	if res := run(t, path, opt); res.Status != StatusUpgraded {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}

	tree, path = sessionTree(t, v1Session)
	opt = options(t, tree, path, &recorder{})
	writeFile(t, opt.QuarantinePath, "something else")
	res := run(t, path, opt)
	if res.Status != StatusFailed || string(readFile(t, path)) != v1Session || string(readFile(t, opt.QuarantinePath)) != "something else" {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}
	leftovers(t, filepath.Dir(path))
}

func TestRecordErrorChangesNothing(t *testing.T) {
	tree, path := sessionTree(t, v1Session)
	opt := options(t, tree, path, nil)
	opt.Record = func(Event) error { return syscall.EIO }
	res := run(t, path, opt)
	if res.Status != StatusFailed || string(readFile(t, path)) != v1Session {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}
	if _, err := os.Stat(opt.QuarantinePath); !os.IsNotExist(err) {
		t.Errorf("an unjournaled quarantine copy was left")
	}
	leftovers(t, filepath.Dir(path))
}

func TestJSIndex(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want int
		ok   bool
	}{
		{"0", 3, 0, true}, {"2", 3, 2, true}, {"3", 3, 0, false}, {"2.0", 3, 2, true}, {"1e0", 3, 1, true},
		{"-0", 3, 0, true}, {"-1", 3, 0, false}, {"1.5", 3, 0, false}, {"1e300", 3, 0, false},
		{"18446744073709551615", 3, 0, false},
	} {
		v := mustParse(t, c.in)
		got, ok := jsIndex(v.Num, c.n)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %d %v, want %d %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestBlank(t *testing.T) {
	for in, want := range map[string]bool{
		"": true, " \t\r\v\f": true, "\u00a0\u3000\u2028\u0085\ufeff": true, "x": false, " {}": false, "\u200b": false,
	} {
		if blank([]byte(in)) != want {
			t.Errorf("blank(%q) = %v", in, !want)
		}
	}
}

func TestIsTemp(t *testing.T) {
	if !IsTemp("s.jsonl", filepath.Base(TempPath("/a/s.jsonl", strings.Repeat("a", 32)))) || IsTemp("s.jsonl", "s.jsonl") ||
		IsTemp("s.jsonl", "s.jsonl.upgrade.x.tmp") || IsTemp("t.jsonl", "s.jsonl.upgrade."+strings.Repeat("a", 32)+".tmp") {
		t.Error("IsTemp")
	}
}

// TestDryRunWithLockFile: a dry run takes an existing session lock (and
// respects it) but creates nothing.
func TestDryRunWithLockFile(t *testing.T) {
	tree, path := sessionTree(t, "\ufeff"+v1Session)
	writeFile(t, path+".lock", "")
	before := treeDigest(t, tree)
	res := run(t, path, Options{DryRun: true})
	if res.Status != StatusPlanned || !res.BOM {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}
	if treeDigest(t, tree) != before {
		t.Errorf("the dry run changed the tree")
	}
	held, err := durable.OS.LockFile(context.Background(), path+".lock", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	if res := run(t, path, Options{DryRun: true, LockTimeout: 10 * time.Millisecond}); res.Status != StatusBusy {
		t.Errorf("dry run under a held lock: %s", res.Status)
	}
}

// TestOwnerAsRoot: run as root (cron over users' trees), the upgraded
// file, the quarantine copy and the directories made for it belong to the
// session's owner; .pisess/ belongs to the tree's owner.
func TestOwnerAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const uid, gid = 4321, 8765
	tree, path := sessionTree(t, v1Session)
	for _, p := range []string{tree, filepath.Dir(path), path} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(path, 0o604); err != nil {
		t.Fatal(err)
	}
	opt := options(t, tree, path, &recorder{})
	res := run(t, path, opt)
	if res.Status != StatusUpgraded {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}
	owned := func(p string, mode os.FileMode) {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid || fi.Mode().Perm() != mode {
			t.Errorf("%s: %d:%d %v, want %d:%d %v", p, st.Uid, st.Gid, fi.Mode().Perm(), uid, gid, mode)
		}
	}
	owned(path, 0o604)
	owned(opt.QuarantinePath, 0o600)
	for d := filepath.Dir(opt.QuarantinePath); d != tree; d = filepath.Dir(d) {
		owned(d, 0o700)
	}
}

func TestSniff(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]int{
		"\ufeff\n \n" + v1Session:                        1,
		`{"type":"session","version":2,"id":"x"}` + "\n": 2,
		`{"type":"session","version":3,"id":"x"}` + "\n": 3,
		"":                                   -1,
		"hello\n":                            -1,
		`{"type":"message","id":"x"}` + "\n": -1,
	} {
		p := writeFile(t, filepath.Join(dir, sha([]byte(content))+".jsonl"), content)
		v, err := Sniff(p)
		if want < 0 {
			if readers.AsRefused(err) == nil {
				t.Errorf("%q: %d %v, want a refusal", content, v, err)
			}
			continue
		}
		if err != nil || v != want {
			t.Errorf("%q: %d %v, want %d", content, v, err, want)
		}
	}
}
