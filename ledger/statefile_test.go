package ledger

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pisess/writers/durable"
)

// TestLazyStateSet: in a set read lazily an entry is decoded when first
// asked for; one that is not JSON of an entry or that keep refuses is not
// there (and, unlike a set read whole, does not make the whole file
// void), a key that could leave the tree is dropped when read; a save
// writes the entries set, keeps those never asked for as they were read,
// and drops those found wanting and the sessions that are gone.
func TestLazyStateSet(t *testing.T) {
	tree := t.TempDir()
	for _, f := range []string{"a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl", "e.jsonl", "new.jsonl"} {
		if err := os.WriteFile(filepath.Join(tree, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(tree, PisessDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	type entry struct {
		N int    `json:"n"`
		S string `json:"s"`
	}
	doc := `{"version":1,"pisess":` + strconv.Quote(Stamp()) + `,"sessions":{` +
		`"a.jsonl":{"n":1,"s":"one"},` +
		`"b.jsonl":{"n":-1,"s":"refused by keep"},` +
		`"c.jsonl":"not an entry",` +
		`"d.jsonl":{"n":4,"s":"never asked for"},` +
		`"gone.jsonl":{"n":5,"s":"its session is gone"},` +
		`"../out.jsonl":{"n":6,"s":"outside the tree"}}}`
	if err := os.WriteFile(filepath.Join(dir, "t.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	keep := func(e entry) bool { return e.N > 0 }
	lazy := loadLazyStateSet(tree, "t.json", 1<<20, keep)
	if e, ok := lazy.Get("a.jsonl"); !ok || e != (entry{1, "one"}) {
		t.Fatalf("a.jsonl: %+v %v", e, ok)
	}
	for _, rel := range []string{"b.jsonl", "c.jsonl", "../out.jsonl", "missing.jsonl"} {
		if e, ok := lazy.Get(rel); ok {
			t.Errorf("%s: %+v, want none", rel, e)
		}
	}

	lazy.Set("new.jsonl", entry{N: 7, S: "set"}, func(old, e entry) bool { return old == e })
	// Two entries encoded into save's one buffer; nothing HTML-escaped.
	lazy.Set("e.jsonl", entry{N: 8, S: "<a&b>"}, func(old, e entry) bool { return old == e })
	if err := lazy.Save(durable.OS, map[string]bool{"a.jsonl": true}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "t.json"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{`"a.jsonl":{"n":1,"s":"one"}`, `"d.jsonl":{"n":4,"s":"never asked for"}`, `"e.jsonl":{"n":8,"s":"<a&b>"}`, `"new.jsonl":{"n":7,"s":"set"}`} {
		if !strings.Contains(got, want) {
			t.Errorf("saved file lacks %s: %s", want, got)
		}
	}
	for _, gone := range []string{"b.jsonl", "c.jsonl", "gone.jsonl", "out.jsonl"} {
		if strings.Contains(got, gone) {
			t.Errorf("saved file still holds %s: %s", gone, got)
		}
	}
	again := loadStateSet(tree, "t.json", 1<<20, keep)
	if len(again.entries) != 4 {
		t.Fatalf("read again: %+v", again.entries)
	}

	// As a set read whole, a document followed by anything but spaces is
	// none.
	if err := os.WriteFile(filepath.Join(dir, "t.json"), append(b, []byte("{}")...), 0o600); err != nil {
		t.Fatal(err)
	}
	more := loadLazyStateSet(tree, "t.json", 1<<20, keep)
	if _, ok := more.Get("a.jsonl"); ok {
		t.Fatal("a document followed by more was read")
	}

	// A document of another pisess (another stamp, or none) is none,
	// read whole or lazily.
	for _, other := range []string{strings.Replace(string(b), Stamp(), "pisess v0 (abc) (state format 1)", 1),
		strings.Replace(string(b), `"pisess":`+strconv.Quote(Stamp())+`,`, "", 1)} {
		if other == string(b) {
			t.Fatalf("the saved file carries no stamp: %s", b)
		}
		if err := os.WriteFile(filepath.Join(dir, "t.json"), []byte(other), 0o600); err != nil {
			t.Fatal(err)
		}
		if n := loadStateSet(tree, "t.json", 1<<20, keep); len(n.entries) != 0 {
			t.Errorf("a file of another stamp was read: %+v", n.entries)
		}
		if l := loadLazyStateSet(tree, "t.json", 1<<20, keep); l.Len() != 0 {
			t.Errorf("a file of another stamp was read lazily")
		}
	}
}
