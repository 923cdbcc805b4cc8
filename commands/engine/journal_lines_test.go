package engine

import (
	"testing"
)

func TestLineDigestIgnoresTheNewline(t *testing.T) {
	if lineDigest([]byte("{torn")) != lineDigest([]byte("{torn\n")) {
		t.Error("a torn line terminated by a later append must keep its digest")
	}
}
