package ledger

import (
	"testing"
)

func TestLineDigestIgnoresTheNewline(t *testing.T) {
	if LineDigest([]byte("{torn")) != LineDigest([]byte("{torn\n")) {
		t.Error("a torn line terminated by a later append must keep its digest")
	}
}
