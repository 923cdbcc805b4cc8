package readers

import (
	"fmt"
	"syscall"
	"testing"
)

// TestTransientClasses: only an I/O or resource error and a lock another
// process holds are failures of the run; every other class is a verdict
// about the session's bytes, which callers may remember (issue 32 §2).
func TestTransientClasses(t *testing.T) {
	transient := map[Class]bool{ClassIO: true, ClassLocked: true}
	for _, c := range []Class{ClassEmptyFile, ClassBadHeader, ClassUnsupportedVer, ClassMalformedJSON, ClassInvalidUTF8,
		ClassLoneSurrogate, ClassUnknownType, ClassUnknownRole, ClassBadEntry, ClassBadEntryID, ClassDuplicateID,
		ClassMissingParent, ClassParentCycle, ClassTornLine, ClassLineTooLong, ClassNondeterministic, ClassBadSessionID,
		ClassIO, ClassLocked, ClassCorrupt, ClassSymlink, ClassSpecialFile, ClassBadSequence, ClassBadSchema,
		ClassFrameTooLarge, ClassNameTooLong} {
		if c.Transient() != transient[c] {
			t.Errorf("%s.Transient() = %t", c, c.Transient())
		}
	}
	emfile := &RefusedError{Path: "/t/s.jsonl", Class: ClassIO, Reason: "open: too many open files", Err: syscall.EMFILE}
	verdict := &RefusedError{Path: "/t/s.jsonl", Line: 3, Class: ClassMissingParent, Reason: "parent x not found"}
	if AsVerdict(fmt.Errorf("migrate: %w", emfile)) != nil {
		t.Error("AsVerdict returns an I/O error as a verdict")
	}
	if AsVerdict(fmt.Errorf("migrate: %w", verdict)) != verdict || AsRefused(fmt.Errorf("x: %w", emfile)) != emfile {
		t.Error("AsVerdict or AsRefused misses the error in the chain")
	}
	var none *RefusedError
	if none.Transient() {
		t.Error("a nil *RefusedError is transient")
	}
}
