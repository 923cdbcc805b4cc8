package ledger

import (
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"path/filepath"
	"strings"

	"pisess/writers/wire"
)

// RefreshRecordName is the refresh record in a tree's .pisess/: for each
// sidecar pisess installed, the source bytes it was built from (length and
// SHA-256) and enough of the store's identity to know the record is still
// about the sidecar on disk. pi marks a sidecar dirty on every save and
// drops its fingerprint (FORMAT.md §8), and only ever appends whole lines:
// with the record, a refresh proves the source is the old bytes plus new
// lines and appends only those to the sidecar (issue 14, item 4).
const RefreshRecordName = "refresh.json"

// refreshRecordMax bounds what is read of the record file: it sits in a
// user's tree and is data, trusted only as far as what it says is checked.
const refreshRecordMax = 32 << 20

// RefreshRecord is one session's entry. Nothing in it is a path: it says
// what to expect, and any mismatch means a full rebuild.
//
// Every member but CorrelationID is required, well formed, and the two
// SHA-256 states finish as their digests: a record that lacks one, or
// disagrees with itself, is not one this pisess wrote (the file carries
// the stamp of the pisess that wrote it, and one of another is ignored),
// and is dropped when read; the session's next refresh is a full rebuild,
// which records it anew.
type RefreshRecord struct {
	SourceBytes  int64  `json:"sourceBytes"`
	SourceSHA256 string `json:"sourceSha256"`
	Entries      uint64 `json:"entries"`
	ChainHash    string `json:"chainHash"`
	IndexSHA256  string `json:"indexSha256"`
	// ManifestDev and ManifestIno identify the installed manifest.json:
	// a sidecar rebuilt by pi, fsck or a rollback has another one.
	ManifestDev uint64 `json:"manifestDev"`
	ManifestIno uint64 `json:"manifestIno"`
	// CorrelationID is the run that installed the sidecar: with the
	// store's own completed event naming it, the record is evidence that
	// pisess built the store, with no need to read the tree's journal (which
	// grows with every run, and loses the run to prune).
	CorrelationID string `json:"correlationId,omitempty"`
	// ManifestSHA256 is the digest of the installed manifest.json: with
	// the index digest, it vouches for everything of the store but its
	// frames, which the refresh then only CRC-checks against their rows
	// (store.ContinueInPlace).
	ManifestSHA256 string `json:"manifestSha256"`
	// SourceXXH3 and SourceSHA256State are the source bytes'
	// normalize.PrefixHash (hex): a refresh proves the prefix by its XXH3
	// and goes on with the SHA-256 from its state, never SHA-256 hashing
	// the prefix again.
	SourceXXH3        string `json:"sourceXxh3"`
	SourceSHA256State string `json:"sourceSha256State"`
	// IndexSHA256State is the index digest's state (hex): a refresh of a
	// sidecar the fresh cache vouches for frame for frame goes on from it
	// without hashing the index rows again.
	IndexSHA256State string `json:"indexSha256State"`
}

// complete reports whether every required member of r is there and well
// formed (RefreshRecord).
func (r RefreshRecord) complete() bool {
	_, sum := r.SHA256()
	_, _, prefix := r.Prefix()
	return sum && prefix && r.SourceBytes > 0 && r.IndexState() != nil && isHexDigest(r.ManifestSHA256)
}

// isHexDigest reports whether s is a SHA-256 digest in lower-case hex.
func isHexDigest(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size && s == strings.ToLower(s)
}

// SHA256 returns the digest of the source bytes the sidecar was built
// from; ok is false when the record's is malformed.
func (r RefreshRecord) SHA256() ([32]byte, bool) {
	var d [32]byte
	b, err := hex.DecodeString(r.SourceSHA256)
	if err != nil || len(b) != len(d) || r.SourceSHA256 != strings.ToLower(r.SourceSHA256) {
		return d, false
	}
	copy(d[:], b)
	return d, true
}

// Prefix returns the parts of the record's normalize.PrefixHash (the
// XXH3 of the source bytes and their SHA-256 state); ok is false when it
// has none or a malformed one, or one whose SHA-256 state does not finish
// as the record's digest.
func (r RefreshRecord) Prefix() (xxh3 [16]byte, sha256State []byte, ok bool) {
	x, err := hex.DecodeString(r.SourceXXH3)
	if err != nil || len(x) != 16 || r.SourceXXH3 != strings.ToLower(r.SourceXXH3) {
		return xxh3, nil, false
	}
	st, n := recordedState(r.SourceSHA256State, r.SourceSHA256)
	if st == nil || n != uint64(r.SourceBytes) {
		return xxh3, nil, false
	}
	copy(xxh3[:], x)
	return xxh3, st, true
}

// IndexState returns the record's index digest state, nil when it has
// none or one that does not finish as the record's index digest.
func (r RefreshRecord) IndexState() []byte {
	st, _ := recordedState(r.IndexSHA256State, r.IndexSHA256)
	return st
}

// recordedState decodes a record's SHA-256 state (hex) and the length it
// has hashed; nil unless it is crypto/sha256's and finishes as digest
// (hex): a record that disagrees with itself is not one pisess wrote.
func recordedState(state, digest string) ([]byte, uint64) {
	st, err := hex.DecodeString(state)
	if err != nil {
		return nil, 0
	}
	n, ok := wire.SHA256StateLength(st)
	if !ok {
		return nil, 0
	}
	h := sha256.New()
	if h.(encoding.BinaryUnmarshaler).UnmarshalBinary(st) != nil || hex.EncodeToString(h.Sum(nil)) != digest {
		return nil, 0
	}
	return st, n
}

// RefreshRecords is one tree's record, loaded once per run and shared by
// its sessions' workers.
type RefreshRecords struct {
	stateSet[RefreshRecord]
}

// RefreshRecordPath returns <tree>/.pisess/refresh.json.
func RefreshRecordPath(tree string) string {
	return filepath.Join(tree, PisessDir, RefreshRecordName)
}

// LoadRefreshRecords reads the tree's record. Missing, unreadable or
// malformed is empty, and an entry that is not complete is dropped: the
// record only saves work.
func LoadRefreshRecords(tree string) *RefreshRecords {
	return &RefreshRecords{loadLazyStateSet(tree, RefreshRecordName, refreshRecordMax, RefreshRecord.complete)}
}

// Put records e for the session rel (it must be complete, or the next
// run drops it).
func (c *RefreshRecords) Put(rel string, e RefreshRecord) {
	c.Set(rel, e, func(old, e RefreshRecord) bool { return old == e })
}
