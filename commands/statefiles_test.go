package commands

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/ledger"
)

// otherStamp is what a state file written by another pisess (another
// build, another format of its verdicts) carries in its "pisess" member.
const otherStamp = "pisess v0.0.1-another-build (state format 0)"

// editStateFile rewrites .pisess/name of tree: edit gets the document's
// top-level members and its sessions (numbers kept exact) to change.
func editStateFile(tb testing.TB, tree, name string, edit func(top map[string]any, sessions map[string]map[string]any)) {
	tb.Helper()
	path := filepath.Join(tree, ledger.PisessDir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("the run wrote no %s: %v", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	sessions := map[string]map[string]any{}
	if m, ok := top["sessions"].(map[string]any); ok {
		for k, v := range m {
			if e, ok := v.(map[string]any); ok {
				sessions[k] = e
			}
		}
	}
	edit(top, sessions)
	all := map[string]any{}
	for k, v := range sessions {
		all[k] = v
	}
	top["sessions"] = all
	out, err := json.Marshal(top)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, append(out, '\n'), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// restamp gives a state file another pisess's stamp.
func restamp(tb testing.TB, tree, name string) {
	tb.Helper()
	editStateFile(tb, tree, name, func(top map[string]any, _ map[string]map[string]any) {
		if s, _ := top["pisess"].(string); s == "" {
			tb.Errorf("%s carries no pisess stamp (a \"pisess\" member naming the build and the format of its verdicts)", name)
		}
		top["pisess"] = otherStamp
	})
}

// relKey is the key of session in tree's state files.
func relKey(tb testing.TB, tree, session string) string {
	tb.Helper()
	rel, err := filepath.Rel(tree, session)
	if err != nil {
		tb.Fatal(err)
	}
	return filepath.ToSlash(rel)
}

// TestStateFilesOfAnotherPisessAreIgnored is issue 34 §4 (stale verdicts):
// the tree's state files carry the stamp of the pisess that wrote them,
// and a run of another stamp ignores them. Each case first shows that a
// doctored entry is believed while the stamp is the run's own (so that the
// file is read at all), then that the same entry under another stamp is
// not: refused.json (a reason the reader never gave), fresh.json (a
// header version the session does not have), refresh.json (the record
// that lets a refresh continue the sidecar in place).
//
// issue 34 §4: fails on 65304d8 (the files carry no stamp, {"version":1}
// only, and a file of any other pisess is believed until pi writes the
// session).
func TestStateFilesOfAnotherPisessAreIgnored(t *testing.T) {
	t.Run("refused.json", func(t *testing.T) {
		tree := exampleTree(t)
		refused := filepath.Join(tree, "--home-dev-projects-demo--", "2026-11-21T22-04-12-987Z_01a20023-733b-73a5-aff4-aebbd7d1fdba.jsonl")
		if r := pisess(t, "migrate", "-q", tree); r.code != ExitClean {
			t.Fatalf("migrate: %s", r)
		}
		const forged = "FORGED: a reason the reader never gave"
		editStateFile(t, tree, "refused.json", func(_ map[string]any, s map[string]map[string]any) {
			e := s[relKey(t, tree, refused)]
			if e == nil {
				t.Fatalf("refused.json does not remember the refused session")
			}
			e["reason"] = forged
		})
		reason := func() string {
			m := pisess(t, "migrate", "--json", tree)
			msg, _ := jsonAt(sessionItem(t, m, refused), "error", "message").(string)
			return msg
		}
		if !strings.Contains(reason(), forged) {
			t.Fatalf("a refused.json of this pisess is not read (the test proves nothing)")
		}
		restamp(t, tree, "refused.json")
		if msg := reason(); strings.Contains(msg, forged) {
			t.Errorf("a refused.json stamped %q is believed: %q", otherStamp, msg)
		}
	})
	t.Run("fresh.json", func(t *testing.T) {
		tree := exampleTree(t)
		session := filepath.Join(tree, "--home-u-proj--", "2026-01-05T10-00-00-000Z_3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b.jsonl")
		if r := pisess(t, "migrate", "-q", tree); r.code != ExitClean {
			t.Fatalf("migrate: %s", r)
		}
		if _, err := os.Stat(filepath.Join(tree, ledger.PisessDir, "fresh.json")); err != nil {
			t.Skipf("this file system's change times are too coarse for the fresh cache to vouch for what a run wrote: %v", err)
		}
		editStateFile(t, tree, "fresh.json", func(_ map[string]any, s map[string]map[string]any) {
			e := s[relKey(t, tree, session)]
			if e == nil {
				t.Fatalf("fresh.json does not vouch for the migrated session")
			}
			e["version"] = json.Number("2") // the walk takes the header's version from the cache
		})
		action := func() any {
			return sessionItem(t, pisess(t, "migrate", "--json", tree), session)["action"]
		}
		if a := action(); a != "refuse" {
			t.Fatalf("a fresh.json of this pisess is not read (action %v; the test proves nothing)", a)
		}
		restamp(t, tree, "fresh.json")
		if a := action(); a != "skip" {
			t.Errorf("a fresh.json stamped %q is believed: action %v, want skip", otherStamp, a)
		}
	})
	t.Run("refresh.json", func(t *testing.T) {
		tree := exampleTree(t)
		proj := filepath.Join(tree, "--home-dev-projects-demo--")
		a := filepath.Join(proj, "2026-11-21T22-04-12-976Z_01a20023-732f-76a7-9e9a-06341b94d760.jsonl")
		b := filepath.Join(proj, "2026-11-21T22-04-12-984Z_01a20023-7338-7011-8430-2cb87c0c4faf.jsonl")
		if r := pisess(t, "migrate", "-q", tree); r.code != ExitClean {
			t.Fatalf("migrate: %s", r)
		}
		appendEntry(t, a, "feed0001")
		appendEntry(t, b, "feed0002")
		incremental := func(session string) any {
			r := pisess(t, "migrate", "--json", session)
			list, _ := jsonAt(reportDoc(t, r.stdout), "detail", "sessions").([]any)
			for _, s := range list {
				if jsonAt(s, "path") == session {
					if jsonAt(s, "outcome") != "done" {
						t.Fatalf("the refresh of %s: %s", filepath.Base(session), r)
					}
					return jsonAt(s, "incremental")
				}
			}
			t.Fatalf("%s is not in the report: %s", session, r)
			return nil
		}
		if inc := incremental(a); inc != true {
			t.Fatalf("a refresh.json of this pisess is not used (incremental %v; the test proves nothing)", inc)
		}
		restamp(t, tree, "refresh.json")
		if inc := incremental(b); inc == true {
			t.Errorf("a refresh.json stamped %q is believed: the sidecar was continued on its record", otherStamp)
		}
	})
}
