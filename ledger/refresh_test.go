package ledger

import (
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/writers/durable"
)

// hashState returns the hex SHA-256 of b and the hex state of the hash
// after it (crypto/sha256's MarshalBinary).
func hashState(tb testing.TB, b []byte) (digest, state string) {
	tb.Helper()
	h := sha256.New()
	h.Write(b)
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), hex.EncodeToString(st)
}

// TestRefreshRecordsDropIncomplete: a refresh record is used only when
// every member a refresh relies on is there and agrees with itself; one
// without the manifest digest, the prefix's XXH3 or SHA-256 state, or the
// index digest state (as no pisess whose state files are read writes it),
// or whose states do not finish as their digests, is dropped when read,
// so that the session's refresh is a full rebuild.
func TestRefreshRecordsDropIncomplete(t *testing.T) {
	src := []byte(`{"type":"session"}` + "\n")
	srcSum, srcState := hashState(t, src)
	idxSum, idxState := hashState(t, []byte(`{"row":1}`+"\n"))
	manSum, _ := hashState(t, []byte("{}"))
	complete := RefreshRecord{SourceBytes: int64(len(src)), SourceSHA256: srcSum, Entries: 1, ChainHash: strings.Repeat("c", 64),
		IndexSHA256: idxSum, ManifestDev: 1, ManifestIno: 2, CorrelationID: "run", ManifestSHA256: manSum,
		SourceXXH3: strings.Repeat("0123456789abcdef", 2), SourceSHA256State: srcState, IndexSHA256State: idxState}
	// A hex digit of the chaining values: still a state, of other bytes.
	flip := func(s string) string {
		d := byte('0')
		if s[20] == d {
			d = '1'
		}
		return s[:20] + string(d) + s[21:]
	}
	cases := map[string]func(r *RefreshRecord){
		"complete":           func(*RefreshRecord) {},
		"no manifest digest": func(r *RefreshRecord) { r.ManifestSHA256 = "" },
		"no XXH3":            func(r *RefreshRecord) { r.SourceXXH3 = "" },
		"no source state":    func(r *RefreshRecord) { r.SourceSHA256State = "" },
		"no index state":     func(r *RefreshRecord) { r.IndexSHA256State = "" },
		"older pisess (none of those)": func(r *RefreshRecord) {
			r.ManifestSHA256, r.SourceXXH3, r.SourceSHA256State, r.IndexSHA256State = "", "", "", ""
		},
		"source state not its digest":   func(r *RefreshRecord) { r.SourceSHA256State = flip(r.SourceSHA256State) },
		"index state not its digest":    func(r *RefreshRecord) { r.IndexSHA256State = flip(r.IndexSHA256State) },
		"manifest digest in upper case": func(r *RefreshRecord) { r.ManifestSHA256 = strings.ToUpper(r.ManifestSHA256) },
	}
	tree := t.TempDir()
	if err := os.Mkdir(filepath.Join(tree, PisessDir), 0o700); err != nil {
		t.Fatal(err)
	}
	recs := LoadRefreshRecords(tree)
	for name, edit := range cases {
		if err := os.WriteFile(filepath.Join(tree, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		r := complete
		edit(&r)
		recs.Put(name, r)
	}
	if err := recs.Save(durable.OS, nil); err != nil {
		t.Fatal(err)
	}
	loaded := LoadRefreshRecords(tree)
	for name := range cases {
		r, ok := loaded.Get(name)
		if want := name == "complete"; ok != want {
			t.Errorf("%s: used %v, want %v (%+v)", name, ok, want, r)
		} else if ok && r != complete {
			t.Errorf("%s: read back %+v", name, r)
		}
	}
}
