package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
)

func TestInspectClean(t *testing.T) {
	store := buildStore(t)
	r := pisess(t, "inspect", store)
	if r.code != ExitClean || r.stderr != "" {
		t.Fatalf("%s", r)
	}
	for _, want := range []string{`"sessionId": "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b"`, "entries        11", "messages       4",
		"branches       1", "compactions    1", "bytes          5971", "segments       1", "checkpoints    0", "ledger events  0", "no problems found"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, r.stdout)
		}
	}

	j := pisess(t, "inspect", "--json", store)
	if j.code != ExitClean {
		t.Fatalf("%s", j)
	}
	obj := j.jsonObject(t)
	m, ok := obj["manifest"].(map[string]any)
	if !ok || m["sessionId"] != "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b" || m["schema"] != "pi.session_store_v2.manifest.v1" {
		t.Errorf("manifest member: %v", obj["manifest"])
	}
	counts, _ := obj["counts"].(map[string]any)
	want := map[string]float64{"entries": 11, "messages": 4, "branches": 1, "compactions": 1, "bytes": 5971,
		"segments": 1, "checkpoints": 0, "ledgerEvents": 0}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("counts.%s = %v, want %v", k, counts[k], v)
		}
	}
	if counts["complete"] != true || obj["clean"] != true {
		t.Errorf("complete/clean: %v", obj)
	}
	if p, ok := obj["problems"].([]any); !ok || len(p) != 0 {
		t.Errorf("problems = %v, want []", obj["problems"])
	}
}

func TestInspectDamaged(t *testing.T) {
	tests := []struct {
		name   string
		damage func(tb testing.TB, store string)
		class  string
		file   string
	}{
		{"flipped payload byte", func(tb testing.TB, store string) {
			fixtures.FlipByte(tb, filepath.Join(store, "segments", "0000000000000001.seg"), 400)
		}, "crc_mismatch", "segments/0000000000000001.seg"},
		{"torn last frame", func(tb testing.TB, store string) {
			seg := filepath.Join(store, "segments", "0000000000000001.seg")
			fi, err := os.Stat(seg)
			if err != nil {
				tb.Fatal(err)
			}
			fixtures.Truncate(tb, seg, fi.Size()-10)
		}, "torn_tail", "segments/0000000000000001.seg"},
		{"missing manifest", func(tb testing.TB, store string) {
			if err := os.Remove(filepath.Join(store, "manifest.json")); err != nil {
				tb.Fatal(err)
			}
		}, "missing_file", "manifest.json"},
		{"group-readable index", func(tb testing.TB, store string) {
			if err := os.Chmod(filepath.Join(store, "index", "offsets.jsonl"), 0o640); err != nil {
				tb.Fatal(err)
			}
		}, "bad_mode", "index/offsets.jsonl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := buildStore(t)
			tt.damage(t, store)
			r := pisess(t, "inspect", store)
			if r.code != ExitProblems {
				t.Fatalf("want exit %d: %s", ExitProblems, r)
			}
			if !strings.Contains(r.stdout, tt.class+": "+tt.file) {
				t.Errorf("text report does not list %s in %s:\n%s", tt.class, tt.file, r.stdout)
			}
			j := pisess(t, "inspect", "--json", store)
			if j.code != ExitProblems {
				t.Fatalf("--json: %s", j)
			}
			obj := j.jsonObject(t)
			if obj["clean"] != false {
				t.Errorf("clean = %v", obj["clean"])
			}
			found := false
			for _, p := range obj["problems"].([]any) {
				p := p.(map[string]any)
				if p["class"] == tt.class && p["file"] == tt.file {
					found = true
					if d, _ := p["detail"].(string); d == "" {
						t.Errorf("problem without detail: %v", p)
					}
				}
			}
			if !found {
				t.Errorf("--json problems lack %s in %s: %v", tt.class, tt.file, obj["problems"])
			}
		})
	}
}

func TestInspectCannotOpen(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.v2")
	r := pisess(t, "inspect", missing)
	if r.code != ExitOperational || !strings.Contains(r.stderr, "nope.v2") {
		t.Fatalf("want exit %d naming the store: %s", ExitOperational, r)
	}
	j := pisess(t, "inspect", "--json", missing)
	if j.code != ExitOperational {
		t.Fatalf("%s", j)
	}
	checkErrorObject(t, j, ClassOperational)
}
