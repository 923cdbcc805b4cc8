package verify

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"pisess/readers"
	"pisess/readers/discover"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// The writer refuses two sessions that the readers accept: one whose
// staging directory's name the file system refuses, and one with an entry
// whose frame does not fit the reference's segment (writers.Stage). fsck
// reads the source of a session without a sidecar to tell what migrate
// would do with it: these checks make it say the same refusals, with the
// same reasons (issue 32 §3: migrate failed them on every run while fsck
// exited 0).

// stagingIDLen is the length of the id that ends a staging directory's
// name (rollback.StagingPath: a migration id's 32 hex digits).
const stagingIDLen = 32

// stagingNameRefusal returns the refusal of a session whose staging
// directory, <stem>.v2.staging.<id> beside it, would be a name longer than
// its file system allows (durable.NameMax), or nil.
func stagingNameRefusal(sessionPath string) *readers.RefusedError {
	sidecar := filepath.Base(discover.SidecarPath(sessionPath))
	n := len(sidecar) + len(".staging.") + stagingIDLen
	if max := durable.NameMax(filepath.Dir(sessionPath)); max <= 0 || n <= max {
		return nil
	}
	return readers.NameTooLong(sessionPath, sidecar, n, unix.ENAMETOOLONG)
}

// frameSlack is how far below the segment size a payload must be for its
// frame to fit whatever its envelope (ids, sequence numbers, timestamp):
// only payloads closer to the limit have their frame's length computed.
const frameSlack = 4 << 10

// frameRefusal returns the refusal of entry e, the seq-th of its session,
// when the writer would refuse its frame as over the reference's segment
// (store.Writer: a payload over the segment, then a frame line over it),
// or nil.
func frameRefusal(sessionPath string, e readers.Entry, seq uint64) *readers.RefusedError {
	n := len(e.Payload)
	switch {
	case n <= wire.MaxSegmentBytes-frameSlack:
		return nil
	case n > wire.MaxSegmentBytes:
		return readers.FrameTooLarge(sessionPath, e.Position, e.ID, fmt.Sprintf("more than %d bytes", n), wire.MaxSegmentBytes, nil)
	}
	// The frame's envelope as the writer makes it: a frame this large
	// starts a segment of its own (frame 1); the segment's number, which
	// fsck does not know, changes the length by a digit at most.
	f := wire.Frame{SegmentSeq: 1, FrameSeq: 1, EntrySeq: seq, EntryID: e.ID, ParentEntryID: e.ParentID,
		EntryType: wire.EntryType(e.Type), Timestamp: wire.FormatTimestamp(time.Unix(0, 0)),
		PayloadSHA256: strings.Repeat("0", 64), PayloadBytes: uint64(n)}
	line := len(wire.AppendFrame(nil, f)) + n
	if line <= wire.MaxSegmentBytes {
		return nil
	}
	return readers.FrameTooLarge(sessionPath, e.Position, e.ID, fmt.Sprintf("%d bytes", line), wire.MaxSegmentBytes, nil)
}
