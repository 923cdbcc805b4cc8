package upgrade

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/fixtures/legacy"
	"pisess/fixtures/pi"
	"pisess/readers"
)

// TestUpgradeWritesPisOwnRewrite upgrades generated legacy files (every
// rule of pi's migration, numbers of every notation, duplicates, white
// space and line endings) and the real-pi vectors relabelled as version 2,
// lets the real pi open a copy of each original (pi migrates it and
// rewrites the file), and compares the two files byte for byte, pi's
// random ids mapped to pisess's deterministic ones.
func TestUpgradeWritesPisOwnRewrite(t *testing.T) {
	pi.Require(t)
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	type item struct{ name, orig, work string }
	var items []item
	add := func(name, content string) {
		work := writeFile(t, filepath.Join(tree, "--w--", name+".jsonl"), content)
		orig := writeFile(t, filepath.Join(dir, "orig", name+".jsonl"), content)
		items = append(items, item{name, orig, work})
	}
	for _, f := range legacy.Generate(1, 96) {
		add(f.Name, f.Content)
	}
	// The real pi's own sessions, relabelled as version 2: their numbers
	// (usage costs as products such as input * 3e-6) must come back as pi
	// wrote them.
	realpi := filepath.Join(fixtures.VectorsDir(t), "realpi")
	paths, _ := filepath.Glob(filepath.Join(realpi, "*", "source.jsonl"))
	if len(paths) == 0 {
		t.Fatalf("no realpi vectors in %s", realpi)
	}
	relabelled := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !strings.Contains(s[:strings.IndexByte(s, '\n')], `"version":3`) {
			continue
		}
		add("realpi-"+filepath.Base(filepath.Dir(p)), strings.Replace(s, `"version":3`, `"version":2`, 1))
		relabelled++
	}
	if relabelled == 0 {
		t.Fatal("no realpi vector has a version 3 header to relabel")
	}
	var origs, works []string
	for _, it := range items {
		res := run(t, it.work, options(t, tree, it.work, &recorder{}))
		if res.Status == StatusRefused && res.Problem.Class == readers.ClassLoneSurrogate && strings.HasPrefix(it.name, "realpi-") {
			// pi keeps the lone surrogate the TypeScript pi wrote, but the
			// reference refuses it: not upgraded, and untouched.
			if !bytes.Equal(readFile(t, it.work), readFile(t, it.orig)) {
				t.Errorf("%s: refused file changed", it.name)
			}
			continue
		}
		if res.Status != StatusUpgraded {
			t.Errorf("%s: %s %+v", it.name, res.Status, res.Problem)
			continue
		}
		origs, works = append(origs, it.orig), append(works, it.work)
	}
	sessions := pi.ReadAll(t, append(origs, works...)...)
	n := len(origs)
	if n < 100 {
		t.Fatalf("only %d files compared", n)
	}
	for i := range origs {
		want, got := sessions[i], sessions[n+i]
		name := filepath.Base(origs[i])
		if !want.Rewritten || want.FileAfterOpen == nil {
			t.Errorf("%s: pi did not rewrite the original: the comparison proves nothing", name)
			continue
		}
		if got.Rewritten {
			t.Errorf("%s: pi rewrote pisess's upgrade on open", name)
		}
		if len(want.Entries) != len(got.Entries) {
			t.Errorf("%s: %d entries, pi has %d", name, len(got.Entries), len(want.Entries))
			continue
		}
		pisBytes := []byte(*want.FileAfterOpen)
		for k := range want.Entries {
			if w, g := want.Entries[k].ID, got.Entries[k].ID; w != g {
				pisBytes = bytes.ReplaceAll(pisBytes, []byte(`"`+w+`"`), []byte(`"`+g+`"`))
			}
		}
		ours := readFile(t, works[i])
		if !bytes.Equal(ours, pisBytes) {
			t.Errorf("%s: pisess's upgrade differs from pi's rewrite (ids mapped):\n%s", name, firstDiff(ours, pisBytes))
		}
	}
}

// firstDiff shows the first differing line of two files.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n got  " + a + "\n pi's " + b
		}
	}
	return "(no line differs)"
}
