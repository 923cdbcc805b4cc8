package verify

import (
	"os"
	"strings"
	"testing"

	"pisess/writers/durable"
)

// TestStatusVouchedHeaderRead: the header a caller read moments before
// (the walk's) stands in for StatusVouched's own read of it: with it, a
// header rewritten on disk since is not seen (it is not read again); its
// id must still be the sidecar's and its version 3; without it the file's
// header is read.
func TestStatusVouchedHeaderRead(t *testing.T) {
	s := newSession(t, "accept/tricky")
	migrate(t, s)
	fast, err := StatusFast(s.path)
	if err != nil || fast.Class != ClassMigrated || fast.HeaderID == "" {
		t.Fatalf("status %+v, %v", fast, err)
	}
	uid, gid, err := durable.OS.Owner(s.path)
	if err != nil {
		t.Fatal(err)
	}
	v := Vouched{HeaderID: fast.HeaderID, OwnerUID: uint32(uid), OwnerGID: uint32(gid), Entries: fast.Entries, Bytes: fast.Bytes}
	// The session's header now names another session, with the same
	// length (the file's size and so its freshness verdict unchanged).
	b, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	other := "0" + fast.HeaderID[1:]
	if other == fast.HeaderID {
		other = "1" + fast.HeaderID[1:]
	}
	if err := os.WriteFile(s.path, []byte(strings.Replace(string(b), fast.HeaderID, other, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := StatusVouched(s.path, v); ok {
		t.Fatal("a header naming another session was vouched for: it was not read")
	}
	read := v
	read.ReadID, read.ReadVersion = fast.HeaderID, 3
	rep, ok := StatusVouched(s.path, read)
	if !ok || rep.HeaderID != fast.HeaderID || rep.Version != 3 {
		t.Fatalf("with the header read before: %+v, %v", rep, ok)
	}
	for name, r := range map[string]Vouched{
		"another id":  {ReadID: other, ReadVersion: 3},
		"version two": {ReadID: fast.HeaderID, ReadVersion: 2},
	} {
		w := v
		w.ReadID, w.ReadVersion = r.ReadID, r.ReadVersion
		if _, ok := StatusVouched(s.path, w); ok {
			t.Errorf("%s: vouched for", name)
		}
	}
}
