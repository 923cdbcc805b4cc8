package payload

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"pisess/readers"
)

// idless is the first entry of vectors/accept/idless_entries, whose id the
// reference derived as 5623f9c8 (counter 0).
const idless = `{"type":"message","timestamp":"2025-06-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}` + "\n"

func decodeOK(tb testing.TB, line string) *Entry {
	tb.Helper()
	e, err := Decode([]byte(line))
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func takenSet(ids ...string) func(string) bool {
	set := map[string]bool{}
	for _, id := range ids {
		set[id] = true
	}
	return func(s string) bool { return set[s] }
}

func TestLegacyIDHash(t *testing.T) {
	e := decodeOK(t, idless)
	id, err := e.LegacyID(takenSet())
	if err != nil {
		t.Fatal(err)
	}
	if id != "5623f9c8" {
		t.Errorf("id %s, want the reference's 5623f9c8", id)
	}
	// The same, spelled out: domain, typed bytes, counter 0.
	sum := sha256.Sum256([]byte("pi.session.legacy-entry-id.v1\x00" + string(e.Typed()) + "\x00\x00\x00\x00"))
	if want := hex.EncodeToString(sum[:])[:8]; id != want {
		t.Errorf("id %s, want %s", id, want)
	}
	// The id an entry is given does not change the id it would derive.
	e.SetID(id)
	if again, _ := e.LegacyID(takenSet()); again != id {
		t.Errorf("after SetID: %s, want %s", again, id)
	}
	// Its parent does: the reference hashes the entry as it stands.
	e.SetParent("p")
	if other, _ := e.LegacyID(takenSet()); other == id {
		t.Errorf("parent did not change the id %s", id)
	}
}

func TestLegacyIDCollisions(t *testing.T) {
	e := decodeOK(t, idless)
	enc := e.Typed()
	var c [legacyIDCounters + 1]string
	for i := range c {
		c[i] = legacyCandidate(enc, uint32(i))
	}
	fallback := c[legacyIDCounters]
	tests := []struct {
		name  string
		taken []string
		want  string
	}{
		{"free", nil, c[0]},
		{"counter 1", c[:1], c[1]},
		{"counter 1 with unrelated ids", append([]string{"00000000", c[2]}, c[0]), c[1]},
		{"counter 99", c[:99], c[99]},
		{"fallback", c[:100], fallback + "-0"},
		{"fallback counts up", append(append([]string{}, c[:100]...), fallback+"-0", fallback+"-1"), fallback + "-2"},
		{"fallback in hex", append(append([]string{}, c[:100]...),
			fallback+"-0", fallback+"-1", fallback+"-2", fallback+"-3", fallback+"-4", fallback+"-5", fallback+"-6", fallback+"-7",
			fallback+"-8", fallback+"-9", fallback+"-a", fallback+"-b", fallback+"-c", fallback+"-d", fallback+"-e", fallback+"-f"),
			fallback + "-10"},
		{"the fallback prefix itself is not a candidate", append(append([]string{}, c[:100]...), fallback), fallback + "-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.LegacyID(takenSet(tt.taken...))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestLegacyIDBashExtras(t *testing.T) {
	base := `{"type":"message","timestamp":"t","message":{"role":"bashExecution","command":"ls","output":"o","exitCode":0`
	one := decodeOK(t, base+`,"a":1}}`)
	if _, err := one.LegacyID(takenSet()); err != nil {
		t.Errorf("one extra member: %v", err)
	}
	none := decodeOK(t, base+`}}`)
	idOne, _ := one.LegacyID(takenSet())
	idNone, _ := none.LegacyID(takenSet())
	if idOne == idNone {
		t.Errorf("the extra member is not hashed: %s", idOne)
	}

	two := decodeOK(t, base+`,"b":1,"a":{"y":1}}}`)
	_, err := two.LegacyID(takenSet())
	var pe *Error
	if !errors.As(err, &pe) || pe.Class != readers.ClassNondeterministic {
		t.Fatalf("two extra members: %v, want a %s refusal", err, readers.ClassNondeterministic)
	}
	if !strings.Contains(pe.Detail, "a, b") || !strings.Contains(pe.Detail, "hash-map order") {
		t.Errorf("detail does not say why: %s", pe.Detail)
	}
	// With an id of its own, the same entry is written deterministically.
	withID := decodeOK(t, `{"type":"message","id":"x","timestamp":"t","message":{"role":"bashExecution","command":"ls","output":"o","exitCode":0,"b":1,"a":2}}`)
	const want = `{"id":"x","message":{"a":2,"b":1,"command":"ls","exitCode":0,"output":"o","role":"bashExecution"},"timestamp":"t","type":"message"}`
	if got := string(withID.Canonical()); got != want {
		t.Errorf("canonical\n got: %s\nwant: %s", got, want)
	}
}
