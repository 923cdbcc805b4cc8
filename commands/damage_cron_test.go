package commands

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/writers/store"
)

// sidecarDamage is one way of damaging a migrated sidecar by hand, and the
// status class the reference gives the result (FORMAT.md §9: a store with
// segments/ but no index while the source has entries is partial; any
// failed check, full integrity included, is corrupt).
type sidecarDamage struct {
	name   string
	class  string
	damage func(tb testing.TB, sidecar string)
}

var sidecarDamages = []sidecarDamage{
	{"truncate", "corrupt", func(tb testing.TB, sidecar string) {
		seg := lastSegment(tb, sidecar)
		fixtures.Truncate(tb, seg, fileSize(tb, seg)-100)
	}},
	{"extend", "corrupt", func(tb testing.TB, sidecar string) {
		// The last frame once more, as a write replayed after a crash
		// would leave it: whole lines, no index row.
		seg := lastSegment(tb, sidecar)
		b, err := os.ReadFile(seg)
		if err != nil {
			tb.Fatal(err)
		}
		lines := bytes.SplitAfter(b, []byte("\n"))
		appendFile(tb, seg, string(lines[len(lines)-2]))
	}},
	{"flip-last-frame", "corrupt", func(tb testing.TB, sidecar string) {
		seg := lastSegment(tb, sidecar)
		fixtures.FlipByte(tb, seg, payloadByte(tb, seg, fileSize(tb, seg)-40))
	}},
	{"flip-middle-frame", "corrupt", func(tb testing.TB, sidecar string) {
		// pi's open reads every frame of a store of up to 10,000 entries
		// (FORMAT.md §11, item 7), and the reference's status checks full
		// integrity.
		seg := lastSegment(tb, sidecar)
		fixtures.FlipByte(tb, seg, payloadByte(tb, seg, fileSize(tb, seg)/2))
	}},
	{"delete-index", "partial", func(tb testing.TB, sidecar string) {
		if err := os.Remove(store.IndexPath(sidecar)); err != nil {
			tb.Fatal(err)
		}
	}},
}

// TestCronRunSeesDamagedSidecar is issue 34 §2: a migrated sidecar damaged
// by hand (truncated, extended, a byte flipped in its last or a middle
// frame, its index deleted), with the fresh cache kept or deleted. `status`
// gives the reference's class before anything mends it; the next plain
// `migrate -q` (the README's cron line) either heals it — rebuilt from the
// source, the damaged one in the run's quarantine, the run silent with exit
// 0, and the sidecar then verifies — or reports it as needing repair (exit
// 4, the session named on stdout). It never calls it up to date.
//
// issue 34 §2: fails on 65304d8 (status says migrated and migrate skips the
// truncated, extended and flipped sidecars as up to date, exit 0, silent;
// verify fails them).
func TestCronRunSeesDamagedSidecar(t *testing.T) {
	t.Setenv(EnvClock, "")
	os.Unsetenv(EnvClock)
	for _, dmg := range sidecarDamages {
		for _, dropFresh := range []bool{false, true} {
			name := dmg.name
			if dropFresh {
				name += "/fresh.json-deleted"
			}
			t.Run(name, func(t *testing.T) {
				tree := genTree(t, 3, 1, 5)
				if r := pisess(t, "migrate", "-q", tree); r.code != ExitClean || r.stdout+r.stderr != "" {
					t.Fatalf("first migrate: %s", r)
				}
				sessions, _ := filepath.Glob(filepath.Join(tree, "--*--", "*.jsonl"))
				if len(sessions) != 3 {
					t.Fatalf("gentree wrote %d sessions", len(sessions))
				}
				session := sessions[0]
				sidecar := strings.TrimSuffix(session, ".jsonl") + ".v2"
				dmg.damage(t, sidecar)
				if dropFresh {
					if err := os.Remove(filepath.Join(tree, ledger.PisessDir, "fresh.json")); err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
				}

				st := pisess(t, "status", "--json", "-v", tree)
				if got := itemClass(t, st, session); got != dmg.class {
					t.Errorf("status says %q, want %q (FORMAT.md §9)", got, dmg.class)
				}

				const id = "cron-after-damage-0001"
				r := pisess(t, "migrate", "-q", "--correlation-id", id, tree)
				rel, _ := filepath.Rel(tree, session)
				switch r.code {
				case ExitClean:
					if r.stdout+r.stderr != "" {
						t.Errorf("migrate -q exited 0 but printed:\n%s", r)
					}
					if v := pisess(t, "verify", session); v.code != ExitClean {
						t.Fatalf("migrate -q exited 0 and silent, but the sidecar does not verify (it was taken as up to date):\n%s", v)
					}
					if n := regularFiles(ledger.Quarantine(tree, id)); n == 0 {
						t.Errorf("the sidecar was rebuilt, but the damaged one is not in the run's quarantine")
					}
					if after := pisess(t, "status", "--json", "-v", tree); itemClass(t, after, session) != "migrated" {
						t.Errorf("after the heal status says %q", itemClass(t, after, session))
					}
				case ExitProblems:
					if !strings.Contains(r.stdout, rel) || !strings.Contains(r.stdout, "repair") {
						t.Errorf("migrate exited 4 without naming the session and its repair:\n%s", r)
					}
				default:
					t.Errorf("migrate: %s", r)
				}
			})
		}
	}
}

// itemClass is the status class of session in a status --json report.
func itemClass(tb testing.TB, r result, session string) string {
	tb.Helper()
	if r.code != ExitClean {
		tb.Fatalf("status: %s", r)
	}
	items, _ := jsonAt(reportDoc(tb, r.stdout), "items").([]any)
	for _, it := range items {
		if jsonAt(it, "path") == session {
			c, _ := jsonAt(it, "class").(string)
			return c
		}
	}
	tb.Fatalf("status does not list %s:\n%s", session, r.stdout)
	return ""
}

// lastSegment is the sidecar's segment of the highest number.
func lastSegment(tb testing.TB, sidecar string) string {
	tb.Helper()
	segs, _ := filepath.Glob(filepath.Join(store.SegmentsPath(sidecar), "*.seg"))
	if len(segs) == 0 {
		tb.Fatalf("%s has no segment", sidecar)
	}
	return segs[len(segs)-1]
}

// payloadByte is the offset of a byte at or after off that is a letter or
// digit (inside a frame's JSON, never its newline), so that flipping its
// lowest bit changes a value, not the line structure.
func payloadByte(tb testing.TB, path string, off int64) int64 {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	for i := off; i < int64(len(b)); i++ {
		c := b[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			return i
		}
	}
	tb.Fatalf("no letter or digit after offset %d in %s", off, path)
	return 0
}
