package wire

// Checkpoint is checkpoints/<seq>.json (FORMAT.md §6).
type Checkpoint struct {
	CheckpointSeq           uint64
	At                      string
	HeadEntrySeq            uint64
	HeadEntryID             string
	SnapshotRef             string // SnapshotRef(CheckpointSeq)
	CompactedBeforeEntrySeq uint64
	ChainHash               string
	Reason                  CheckpointReason
}

var checkpointNames = []string{"schema", "checkpointSeq", "at", "headEntrySeq", "headEntryId", "snapshotRef", "compactedBeforeEntrySeq", "chainHash", "reason"}

func (c Checkpoint) value() Value {
	return Object(
		Member{"schema", String(SchemaCheckpoint)},
		Member{"checkpointSeq", U64(c.CheckpointSeq)},
		Member{"at", String(c.At)},
		Member{"headEntrySeq", U64(c.HeadEntrySeq)},
		Member{"headEntryId", String(c.HeadEntryID)},
		Member{"snapshotRef", String(c.SnapshotRef)},
		Member{"compactedBeforeEntrySeq", U64(c.CompactedBeforeEntrySeq)},
		Member{"chainHash", String(c.ChainHash)},
		Member{"reason", String(string(c.Reason))},
	)
}

// AppendCheckpoint appends c pretty-printed, no trailing newline.
func AppendCheckpoint(dst []byte, c Checkpoint) []byte { return AppendPretty(dst, c.value()) }

// CheckCheckpoint applies the reference's checkpoint document rules:
// positive checkpointSeq and headEntrySeq, RFC 3339 at, entry-id pattern,
// canonical snapshotRef, compactedBeforeEntrySeq not above the head,
// lower-case chain hash, known reason. Whether the number matches the file
// name is the reader's check.
func CheckCheckpoint(c Checkpoint) error {
	fail := func(member, reason string) error { return docErr(DocCheckpoint, member, reason) }
	switch {
	case c.CheckpointSeq == 0:
		return fail("checkpointSeq", "must be positive")
	case !ValidRFC3339(c.At):
		return fail("at", "not an RFC 3339 timestamp")
	case c.HeadEntrySeq == 0:
		return fail("headEntrySeq", "must be positive")
	case !ValidEntryID(c.HeadEntryID):
		return fail("headEntryId", "does not match the V2 entry-id contract")
	case c.SnapshotRef != SnapshotRef(c.CheckpointSeq):
		return fail("snapshotRef", "must be "+SnapshotRef(c.CheckpointSeq))
	case c.CompactedBeforeEntrySeq > c.HeadEntrySeq:
		return fail("compactedBeforeEntrySeq", "exceeds headEntrySeq")
	case !ValidSHA256Hex(c.ChainHash):
		return fail("chainHash", "not a lower-case SHA-256 hex digest")
	case !c.Reason.Valid():
		return fail("reason", "unsupported checkpoint reason")
	}
	return nil
}

// ParseCheckpoint decodes a checkpoint file (at most 1 MiB) and applies
// CheckCheckpoint.
func ParseCheckpoint(b []byte) (Checkpoint, error) {
	if len(b) > MaxDocumentBytes {
		return Checkpoint{}, &DocError{Doc: DocCheckpoint, Reason: "exceeds the 1 MiB read limit", Err: ErrTooLarge}
	}
	v, err := parseDoc(DocCheckpoint, b, nil)
	if err != nil {
		return Checkpoint{}, err
	}
	return decodeCheckpoint(decodeObject(DocCheckpoint, "", v, checkpointNames, false))
}

func decodeCheckpoint(d *fields) (Checkpoint, error) {
	d.check(0, d.str(0) == SchemaCheckpoint, "unsupported schema")
	c := Checkpoint{
		CheckpointSeq:           d.u64(1),
		At:                      d.str(2),
		HeadEntrySeq:            d.u64(3),
		HeadEntryID:             d.str(4),
		SnapshotRef:             d.str(5),
		CompactedBeforeEntrySeq: d.u64(6),
		ChainHash:               d.str(7),
		Reason:                  CheckpointReason(d.str(8)),
	}
	if err := d.error(); err != nil {
		return Checkpoint{}, err
	}
	if err := CheckCheckpoint(c); err != nil {
		return Checkpoint{}, err
	}
	return c, nil
}
