package payload

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"

	"pisess/readers"
)

// legacyIDDomain prefixes every hash of a legacy id (FORMAT.md §10).
const legacyIDDomain = "pi.session.legacy-entry-id.v1\x00"

// legacyIDCounters is how many counters give an 8-hex id before the
// fallback form "<prefix of counter 100>-<n in hex>".
const legacyIDCounters = 100

// LegacyID returns the id the reference derives for an entry that has none
// (FORMAT.md §10): SHA-256 over the domain, the entry's typed serialization
// (without an id) and a big-endian counter, first 8 hex characters; the
// counter goes up while the candidate is taken, and after 99 the fallback
// counts n from 0. taken reports whether an id is already present (every
// explicit id in the file and the ids synthesized so far); it must be false
// for some n.
//
// An entry whose serialization the reference does not fix is refused: a
// bashExecution message with two or more extra members, which the reference
// writes in hash-map order, gets a different id on every run there.
func (e *Entry) LegacyID(taken func(string) bool) (string, error) {
	if extra := e.extraMembers(); len(extra) >= 2 {
		return "", &Error{
			Class: readers.ClassNondeterministic,
			Detail: "entry has no id and its bashExecution message has " + strconv.Itoa(len(extra)) +
				" extra members (" + strings.Join(extra, ", ") + "): the reference serializes them in " +
				"hash-map order, so the id it derives differs from run to run",
		}
	}
	// The reference hashes the entry as it was read, before it had an id.
	enc := e.write(nil, typedOrder, true)
	for c := uint32(0); c < legacyIDCounters; c++ {
		if id := legacyCandidate(enc, c); !taken(id) {
			return id, nil
		}
	}
	prefix := legacyCandidate(enc, legacyIDCounters)
	for n := uint64(0); ; n++ {
		if id := prefix + "-" + strconv.FormatUint(n, 16); !taken(id) {
			return id, nil
		}
	}
}

func legacyCandidate(enc []byte, counter uint32) string {
	h := sha256.New()
	h.Write([]byte(legacyIDDomain))
	h.Write(enc)
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], counter)
	h.Write(c[:])
	return hex.EncodeToString(h.Sum(nil))[:8]
}
