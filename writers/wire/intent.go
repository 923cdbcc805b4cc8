package wire

// RollbackIntent is tmp/rollback.intent.json (FORMAT.md §6): written before
// a rollback to a checkpoint touches the store, removed after it.
type RollbackIntent struct {
	Checkpoint          Checkpoint
	MigrationID         string
	CorrelationID       string
	RetainedIndexSHA256 string
	RetainedIndexBytes  uint64
	Manifest            *IntentManifest // nil when the store had no manifest (member omitted)
}

// IntentManifest is what a rollback keeps of the manifest it rewrites.
type IntentManifest struct {
	SessionID    string
	SourceFormat SourceFormat
	CreatedAt    string
}

var (
	intentNames         = []string{"schema", "checkpoint", "migrationId", "correlationId", "retainedIndexSha256", "retainedIndexBytes", "manifest"}
	intentManifestNames = []string{"sessionId", "sourceFormat", "createdAt"}
)

func (r RollbackIntent) value() Value {
	members := []Member{
		{"schema", String(SchemaRollbackIntent)},
		{"checkpoint", r.Checkpoint.value()},
		{"migrationId", String(r.MigrationID)},
		{"correlationId", String(r.CorrelationID)},
		{"retainedIndexSha256", String(r.RetainedIndexSHA256)},
		{"retainedIndexBytes", U64(r.RetainedIndexBytes)},
	}
	if m := r.Manifest; m != nil {
		members = append(members, Member{"manifest", Object(
			Member{"sessionId", String(m.SessionID)},
			Member{"sourceFormat", String(string(m.SourceFormat))},
			Member{"createdAt", String(m.CreatedAt)},
		)})
	}
	return Object(members...)
}

// AppendRollbackIntent appends r pretty-printed, no trailing newline.
func AppendRollbackIntent(dst []byte, r RollbackIntent) []byte {
	return AppendPretty(dst, r.value())
}

// CheckRollbackIntent applies the reference's intent rules: a valid
// checkpoint, UUID migrationId, correlation-id pattern, lower-case
// retainedIndexSha256, positive retainedIndexBytes, and a valid manifest
// context when present.
func CheckRollbackIntent(r RollbackIntent) error {
	fail := func(member, reason string) error { return docErr(DocRollbackIntent, member, reason) }
	if err := CheckCheckpoint(r.Checkpoint); err != nil {
		return err
	}
	switch {
	case !ValidUUID(r.MigrationID):
		return fail("migrationId", "must be a UUID")
	case !ValidCorrelationID(r.CorrelationID):
		return fail("correlationId", "does not match ^[A-Za-z0-9._:-]{8,128}$")
	case !ValidSHA256Hex(r.RetainedIndexSHA256):
		return fail("retainedIndexSha256", "not a lower-case SHA-256 hex digest")
	case r.RetainedIndexBytes == 0:
		return fail("retainedIndexBytes", "must be positive")
	}
	if m := r.Manifest; m != nil {
		switch {
		case !ValidUUID(m.SessionID):
			return fail("manifest.sessionId", "must be a UUID")
		case !m.SourceFormat.Valid():
			return fail("manifest.sourceFormat", "unsupported source format")
		case !ValidRFC3339(m.CreatedAt):
			return fail("manifest.createdAt", "not an RFC 3339 timestamp")
		}
	}
	return nil
}

// ParseRollbackIntent decodes an intent (at most 1 MiB) and applies
// CheckRollbackIntent. Unknown members of the intent and of its manifest
// context are ignored, as the reference's types do not deny them; the
// embedded checkpoint is as strict as a checkpoint file.
func ParseRollbackIntent(b []byte) (RollbackIntent, error) {
	if len(b) > MaxDocumentBytes {
		return RollbackIntent{}, &DocError{Doc: DocRollbackIntent, Reason: "exceeds the 1 MiB read limit", Err: ErrTooLarge}
	}
	v, err := parseDoc(DocRollbackIntent, b, nil)
	if err != nil {
		return RollbackIntent{}, err
	}
	d := decodeObject(DocRollbackIntent, "", v, intentNames, true)
	d.check(0, d.str(0) == SchemaRollbackIntent, "unsupported schema")
	var r RollbackIntent
	cp := d.nested(1, checkpointNames, false)
	if cp.err == nil {
		c, err := decodeCheckpoint(cp)
		if err != nil {
			return RollbackIntent{}, err
		}
		r.Checkpoint = c
	}
	d.join(cp)
	r.MigrationID = d.str(2)
	r.CorrelationID = d.str(3)
	r.RetainedIndexSHA256 = d.str(4)
	r.RetainedIndexBytes = d.u64(5)
	if d.optional(6) {
		m := d.nestedValue(6, *d.val(6), intentManifestNames, true)
		r.Manifest = &IntentManifest{SessionID: m.str(0), SourceFormat: SourceFormat(m.str(1)), CreatedAt: m.str(2)}
		d.join(m)
	}
	if err := d.error(); err != nil {
		return RollbackIntent{}, err
	}
	if err := CheckRollbackIntent(r); err != nil {
		return RollbackIntent{}, err
	}
	return r, nil
}
