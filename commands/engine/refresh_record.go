package engine

import (
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"path/filepath"
	"strings"

	"pisess/ledger"
	"pisess/readers/normalize"
	"pisess/writers/wire"
)

// RefreshRecordName is the refresh record in a tree's .pisess/: for each
// sidecar pisess installed, the source bytes it was built from (length and
// SHA-256) and enough of the store's identity to know the record is still
// about the sidecar on disk. pi marks a sidecar dirty on every save and
// drops its fingerprint (FORMAT.md §8), and only ever appends whole lines:
// with the record, a refresh proves the source is the old bytes plus new
// lines and stages only those (issue 14, item 4).
const RefreshRecordName = "refresh.json"

// refreshRecordMax bounds what is read of the record file: it sits in a
// user's tree and is data, trusted only as far as what it says is checked.
const refreshRecordMax = 32 << 20

// refreshRecord is one session's entry. Nothing in it is a path: it says
// what to expect, and any mismatch means a full rebuild.
type refreshRecord struct {
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
	// (store.Options.BaseVouched). A record without it (an older pisess)
	// has the copy read every frame.
	ManifestSHA256 string `json:"manifestSha256,omitempty"`
	// SourceXXH3 and SourceSHA256State are the source bytes'
	// normalize.PrefixHash (hex): with them a refresh proves the prefix
	// by its XXH3 and goes on with the SHA-256 from its state, never
	// SHA-256 hashing the prefix again. A record without them (an older
	// pisess) has the prefix hashed with SHA-256.
	SourceXXH3        string `json:"sourceXxh3,omitempty"`
	SourceSHA256State string `json:"sourceSha256State,omitempty"`
	// IndexSHA256State is the index digest's state (hex): a refresh in
	// place of a sidecar the fresh cache vouches for goes on from it
	// without hashing the index rows again. A record without it (an
	// older pisess) has the rows hashed.
	IndexSHA256State string `json:"indexSha256State,omitempty"`
}

func (r refreshRecord) sha() ([32]byte, bool) {
	var d [32]byte
	b, err := hex.DecodeString(r.SourceSHA256)
	if err != nil || len(b) != len(d) || r.SourceSHA256 != strings.ToLower(r.SourceSHA256) {
		return d, false
	}
	copy(d[:], b)
	return d, true
}

// prefix returns the record's PrefixHash, nil when it has none or a
// malformed one, or one whose SHA-256 state does not finish as the
// record's digest (the prefix is then hashed with SHA-256).
func (r refreshRecord) prefix() *normalize.PrefixHash {
	x, err := hex.DecodeString(r.SourceXXH3)
	if err != nil || len(x) != 16 || r.SourceXXH3 != strings.ToLower(r.SourceXXH3) {
		return nil
	}
	st, n := recordedState(r.SourceSHA256State, r.SourceSHA256)
	if st == nil || n != uint64(r.SourceBytes) {
		return nil
	}
	p := &normalize.PrefixHash{SHA256State: st}
	copy(p.XXH3[:], x)
	return p
}

// indexState returns the record's index digest state, nil when it has
// none or one that does not finish as the record's index digest (the
// rows are then hashed).
func (r refreshRecord) indexState() []byte {
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

// refreshRecords is one tree's record, loaded once per run and shared by
// its sessions' workers.
type refreshRecords struct {
	stateSet[refreshRecord]
}

func refreshRecordPath(tree string) string {
	return filepath.Join(tree, ledger.PisessDir, RefreshRecordName)
}

// loadRefreshRecords reads the tree's record. Missing, unreadable or
// malformed is empty: the record only saves work.
func loadRefreshRecords(tree string) *refreshRecords {
	return &refreshRecords{loadLazyStateSet(tree, RefreshRecordName, refreshRecordMax, func(e refreshRecord) bool {
		_, ok := e.sha()
		return ok && e.SourceBytes > 0
	})}
}

func (c *refreshRecords) put(rel string, e refreshRecord) {
	c.set(rel, e, func(old, e refreshRecord) bool { return old == e })
}
