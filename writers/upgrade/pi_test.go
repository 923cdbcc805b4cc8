package upgrade

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/fixtures/pi"
	"pisess/readers"
	"pisess/readers/jsonl"
)

// TestRealPiReadsTheUpgradeAsTheOriginal upgrades every hand-written v1/v2
// file of the pi driver and two reject vectors, and checks with the real
// TypeScript pi that the upgraded file is the conversation pi makes of the
// original (pi upgrades a copy in memory, with random ids), and that pi
// does not rewrite it on open.
func TestRealPiReadsTheUpgradeAsTheOriginal(t *testing.T) {
	pi.Require(t)
	dir := t.TempDir()
	legacy := pi.WriteLegacyFiles(t, filepath.Join(dir, "legacy"))
	type item struct {
		name, orig, work string
		res              *Result
	}
	var items []item
	tree := filepath.Join(dir, "tree")
	add := func(name, src string) {
		work := filepath.Join(tree, "--home-dev--", name+".jsonl")
		copyFile(t, src, work)
		orig := filepath.Join(dir, "orig", name+".jsonl")
		copyFile(t, src, orig)
		items = append(items, item{name: name, orig: orig, work: work})
	}
	for _, f := range legacy {
		add(f.Name, f.Path)
	}
	vectors := fixtures.VectorsDir(t)
	add("vector-v1_header_version_1", filepath.Join(vectors, "reject", "v1_header_version_1.jsonl"))
	add("vector-v2_hookmessage", filepath.Join(vectors, "reject", "v2_hookmessage.jsonl"))
	for _, c := range craftedLegacy {
		add("crafted-"+c.name, writeFile(t, filepath.Join(dir, "crafted", c.name+".jsonl"), c.content))
	}

	var origs, works []string
	var kept []item
	for _, it := range items {
		rec := &recorder{}
		before := readFile(t, it.work)
		it.res = run(t, it.work, options(t, tree, it.work, rec))
		if it.name == "v1-messy" {
			// A malformed line pi would drop silently: refused, untouched.
			if it.res.Status != StatusRefused || it.res.Problem.Line != 4 || it.res.Problem.Class != readers.ClassMalformedJSON {
				t.Errorf("%s: got %s %+v, want refused at line 4 (malformed_json)", it.name, it.res.Status, it.res.Problem)
			}
			if !bytes.Equal(readFile(t, it.work), before) || len(rec.events) != 0 {
				t.Errorf("%s: refused file changed or journaled", it.name)
			}
			continue
		}
		if it.res.Status != StatusUpgraded {
			t.Fatalf("%s: status %s %+v", it.name, it.res.Status, it.res.Problem)
		}
		if got := readFile(t, it.res.Quarantine); !bytes.Equal(got, before) {
			t.Errorf("%s: quarantined original differs from the original", it.name)
		}
		kept = append(kept, it)
		origs = append(origs, it.orig)
		works = append(works, it.work)
	}
	sessions := pi.ReadAll(t, append(origs, works...)...)
	for i, it := range kept {
		t.Run(it.name, func(t *testing.T) {
			want, got := sessions[i], sessions[len(kept)+i]
			if !want.Rewritten {
				t.Errorf("pi did not upgrade the original itself: the test proves nothing")
			}
			if got.Rewritten {
				t.Errorf("pi rewrote pisess's upgraded file on open")
			}
			sameConversation(t, want, got)

			// pi's open in place leaves the bytes alone.
			before := readFile(t, it.work)
			s := pi.ReadWith(t, it.work, pi.ReadOptions{InPlace: true})
			if s.Rewritten || !bytes.Equal(readFile(t, it.work), before) {
				t.Errorf("pi's in-place open changed the upgraded file")
			}

			// The reference's reader agrees with the upgrade's report.
			src, err := jsonl.Open(it.work, jsonl.Options{})
			ref := it.res.Reference
			switch {
			case err == nil && !ref.Migratable:
				t.Errorf("jsonl.Open accepts the upgraded file, but the report says %+v", ref.Problem)
			case err != nil && ref.Migratable:
				t.Errorf("report says migratable, jsonl.Open refuses: %v", err)
			case err != nil:
				r := readers.AsRefused(err)
				if r == nil || r.Class != ref.Problem.Class || r.Line != ref.Problem.Line || r.Reason != ref.Problem.Reason {
					t.Errorf("jsonl.Open: %v\nreport:     %+v", err, ref.Problem)
				}
			}
			if src != nil {
				src.Close()
			}
			t.Logf("%s: v%d, %d entries, %d ids, roles %v, reference: %+v %+v", it.name, it.res.Version,
				it.res.Entries, len(it.res.IDs), it.res.RolesRenamed, ref.Migratable, ref.Problem)
		})
	}
}

// sameConversation compares what pi makes of the original (random ids)
// with what it makes of the upgrade, mapping ids by position.
func sameConversation(t *testing.T, want, got pi.Session) {
	t.Helper()
	if len(want.Entries) != len(got.Entries) {
		t.Fatalf("%d entries, want %d", len(got.Entries), len(want.Entries))
	}
	ids := map[string]string{} // pi's id → ours
	for i := range want.Entries {
		ids[want.Entries[i].ID] = got.Entries[i].ID
	}
	for i, w := range want.Entries {
		g := got.Entries[i]
		if w.Type != g.Type {
			t.Errorf("entry %d: type %s, want %s", i, g.Type, w.Type)
		}
		switch {
		case (w.ParentID == nil) != (g.ParentID == nil) || w.ParentIDMissing != g.ParentIDMissing:
			t.Errorf("entry %d: parent %v, want %v", i, g.ParentID, w.ParentID)
		case w.ParentID != nil && mapID(ids, *w.ParentID) != *g.ParentID:
			t.Errorf("entry %d: parent %s, want %s (pi's %s)", i, *g.ParentID, mapID(ids, *w.ParentID), *w.ParentID)
		}
		if a, b := remap(t, w.Raw, ids), decodeAny(t, g.Raw); !reflect.DeepEqual(a, b) {
			t.Errorf("entry %d differs:\n got %s\nwant %s", i, g.Raw, w.Raw)
		}
	}
	if (want.LeafID == nil) != (got.LeafID == nil) || want.LeafID != nil && mapID(ids, *want.LeafID) != *got.LeafID {
		t.Errorf("leaf %v, want %v", got.LeafID, want.LeafID)
	}
	if a, b := remap(t, want.Header.Raw, ids), decodeAny(t, got.Header.Raw); !reflect.DeepEqual(a, b) {
		t.Errorf("header differs:\n got %s\nwant %s", got.Header.Raw, want.Header.Raw)
	}
	wm, _ := json.Marshal(want.Context.Messages)
	gm, _ := json.Marshal(got.Context.Messages)
	if a, b := remap(t, wm, ids), decodeAny(t, gm); !reflect.DeepEqual(a, b) {
		t.Errorf("buildSessionContext messages differ:\n got %s\nwant %s", gm, wm)
	}
	if want.Context.ThinkingLevel != got.Context.ThinkingLevel || !reflect.DeepEqual(want.Context.Model, got.Context.Model) {
		t.Errorf("context settings %s %+v, want %s %+v", got.Context.ThinkingLevel, got.Context.Model,
			want.Context.ThinkingLevel, want.Context.Model)
	}
	if !reflect.DeepEqual(remapLabels(want.Labels, ids), got.Labels) {
		t.Errorf("labels %v, want %v", got.Labels, want.Labels)
	}
}

func mapID(ids map[string]string, id string) string {
	if m, ok := ids[id]; ok {
		return m
	}
	return id
}

func remapLabels(labels map[string]string, ids map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		out[mapID(ids, k)] = v
	}
	return out
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// remap decodes b and replaces every string that is one of pi's ids by
// ours.
func remap(t *testing.T, b []byte, ids map[string]string) any {
	t.Helper()
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return mapID(ids, x)
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return v
	}
	return walk(decodeAny(t, b))
}

// craftedLegacy are v1/v2 files with what the hand-written ones do not
// have: every case of pi's rules that pisess reproduces.
var craftedLegacy = []struct{ name, content string }{
	{"v1-firstkept-cases", `{"type":"session","version":null,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/c"}
{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}
{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"two"}],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}
{"type":"compaction","timestamp":"2025-01-01T00:00:03.000Z","summary":"float index","firstKeptEntryIndex":2.0,"tokensBefore":1}
{"type":"compaction","timestamp":"2025-01-01T00:00:04.000Z","summary":"self","firstKeptEntryIndex":4,"tokensBefore":1}
{"type":"compaction","timestamp":"2025-01-01T00:00:05.000Z","summary":"minus zero is the header","firstKeptEntryIndex":-0,"tokensBefore":1}
{"type":"compaction","timestamp":"2025-01-01T00:00:06.000Z","summary":"forward to an explicit id","firstKeptEntryIndex":8,"tokensBefore":1,"firstKeptEntryId":"stale"}
{"type":"compaction","timestamp":"2025-01-01T00:00:07.000Z","summary":"forward, no id","firstKeptEntryIndex":9,"tokensBefore":1,"firstKeptEntryId":"gone"}
{"type":"message","id":"explicit1","timestamp":"2025-01-01T00:00:08.000Z","message":{"role":"user","content":"had an id","timestamp":8}}
{"type":"message","timestamp":"2025-01-01T00:00:09.000Z","message":{"role":"user","content":"none","timestamp":9}}
{"type":"compaction","timestamp":"2025-01-01T00:00:10.000Z","summary":"exponent index","firstKeptEntryIndex":1e0,"tokensBefore":1}
{"type":"label","timestamp":"2025-01-01T00:00:11.000Z","targetId":"explicit1","label":"names an old id"}
{"type":"message","timestamp":"2025-01-01T00:00:12.000Z","message":{"role":"hookMessage","customType":"h","content":"v1 hook","display":true,"timestamp":12}}
{"type":"compaction","timestamp":"2025-01-01T00:00:13.000Z","summary":"last","firstKeptEntryIndex":2,"tokensBefore":1}
{"type":"message","timestamp":"2025-01-01T00:00:14.000Z","message":{"role":"user","content":"after","timestamp":14}}
`},
	{"v1-messy-but-whole", "\ufeff" + `{"type":"session","id":"s2","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/c","extra":{"b":1,"a":[1.50,1E2,12345678901234567890123,-0,"\u00e9\u2028<&>"]}}` + "\r\n" +
		"\r\n" +
		"\u00a0\u3000 \t\n" +
		`{"type":"message","type":"message","timestamp":"2025-01-01T00:00:01.000Z","id":"dup","id":null,"parentId":"zz","message":{"role":"user","content":"dups","timestamp":1}}` + "\r\n" +
		"\ufeff\n" +
		"\u0085\n" +
		`{"type":"session","id":"second-header","timestamp":"2025-01-01T00:00:02.000Z","cwd":"/d"}` + "\n" +
		`{"type":"thinking_level_change","timestamp":"2025-01-01T00:00:03.000Z","thinkingLevel":"high"}` + "\n" +
		`{"type":"message","timestamp":"2025-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"no final newline"}],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0.25,"output":1e-7,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":4}}`},
	{"v2-cases", `{"version":2,"type":"session","id":"s3","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/c"}
{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}
{"type":"message","id":"a2","parentId":"a1","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"hookMessage","role":"hookMessage","customType":"h","content":"dup role","display":true,"timestamp":2}}
{"type":"message","id":"a3","parentId":"a2","timestamp":"2025-01-01T00:00:03.000Z","message":{"role":"hookMessage","role":"user","content":"last role wins","timestamp":3}}
{"type":"message","id":"a4","parentId":"a3","timestamp":"2025-01-01T00:00:04.000Z","message":{"role":"user","content":"earlier"},"message":{"role":"hookMessage","customType":"h","content":"last message wins","display":false,"timestamp":4}}
{"type":"custom","id":"a5","parentId":"a4","timestamp":"2025-01-01T00:00:05.000Z","customType":"x","data":{"role":"hookMessage"}}
{"type":"message","parentId":"a5","timestamp":"2025-01-01T00:00:06.000Z","message":{"role":"user","content":"no id in a v2 file","timestamp":6}}
`},
}
