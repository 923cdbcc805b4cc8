package jsonl

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"testing"

	"pisess/readers/normalize"
)

// TestOpenAppendPrefixHash: a file that only grew is continued from the
// PrefixHash its first read left (the prefix proved by its XXH3, the
// SHA-256 going on from its state), ends with the fingerprint and
// PrefixHash of the whole file, and any change to the prefix, a state of
// another length, or no PrefixHash at all (every refresh record has one)
// is ErrNotAppended.
func TestOpenAppendPrefixHash(t *testing.T) {
	first := session(msg("a1", "null"), msg("a2", "a1"))
	path := writeFile(t, "s.jsonl", first)
	_, src, err := readAll(t, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	prefix := src.Prefix()
	known := func(id string) bool { return id == "a1" || id == "a2" }
	grown := first + msg("a3", "a2") + "\n" + msg("a4", "a3") + "\n"
	whole := sha256.Sum256([]byte(grown))

	appendTo := func(content string, opt AppendOptions) ([]string, *AppendSource, error) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		a, err := OpenAppend(path, opt)
		if err != nil {
			return nil, nil, err
		}
		defer a.Close()
		var ids []string
		for {
			e, err := a.Next()
			if errors.Is(err, io.EOF) {
				return ids, a, nil
			}
			if err != nil {
				return ids, a, err
			}
			ids = append(ids, e.ID)
		}
	}
	ids, a, err := appendTo(grown, AppendOptions{Offset: int64(len(first)), Prefix: prefix, Known: known})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != "a3" || ids[1] != "a4" {
		t.Fatalf("appended entries %v", ids)
	}
	if got := a.Fingerprint().SHA256; got != hex.EncodeToString(whole[:]) {
		t.Fatalf("fingerprint %s, want the whole file's", got)
	}
	// The next refresh goes on from here: what a first read of the grown
	// file leaves.
	_, full, err := readAll(t, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.Prefix(), full.Prefix(); got.XXH3 != want.XXH3 || string(got.SHA256State) != string(want.SHA256State) {
		t.Fatal("the PrefixHash after the appended lines is not the whole file's")
	}

	// The same length, one byte of the prefix changed: its XXH3 differs.
	changed := []byte(grown)
	changed[len(first)-10] ^= 1
	if _, _, err := appendTo(string(changed), AppendOptions{Offset: int64(len(first)), Prefix: prefix, Known: known}); !errors.Is(err, ErrNotAppended) {
		t.Fatalf("a changed prefix: %v, want ErrNotAppended", err)
	}
	// A state of another length (the record of another file size).
	if _, _, err := appendTo(grown, AppendOptions{Offset: int64(len(first)) - 1, Prefix: prefix, Known: known}); !errors.Is(err, ErrNotAppended) {
		t.Fatalf("a state of another length: %v, want ErrNotAppended", err)
	}
	bad := normalize.PrefixHash{SHA256State: prefix.SHA256State[:10], XXH3: prefix.XXH3}
	if _, _, err := appendTo(grown, AppendOptions{Offset: int64(len(first)), Prefix: bad, Known: known}); !errors.Is(err, ErrNotAppended) {
		t.Fatalf("a truncated state: %v, want ErrNotAppended", err)
	}
	if _, _, err := appendTo(grown, AppendOptions{Offset: int64(len(first)), Known: known}); !errors.Is(err, ErrNotAppended) {
		t.Fatalf("no PrefixHash: %v, want ErrNotAppended", err)
	}
}
