package wire

import "strconv"

// MigrationEvent is one line of migrations/ledger.jsonl (FORMAT.md §7).
type MigrationEvent struct {
	MigrationID   string // a UUID
	Phase         Phase
	At            string
	SourcePath    string
	TargetPath    string
	SourceFormat  SourceFormat
	TargetFormat  SourceFormat
	Verification  Verification
	Outcome       Outcome
	ErrorClass    ErrorClass // "" when none (member omitted)
	CorrelationID string
}

// Verification is a migration event's verification flags (§9).
type Verification struct {
	EntryCountMatch bool
	HashChainMatch  bool
	IndexConsistent bool
}

var (
	eventNames        = []string{"schema", "migrationId", "phase", "at", "sourcePath", "targetPath", "sourceFormat", "targetFormat", "verification", "outcome", "errorClass", "correlationId"}
	verificationNames = []string{"entryCountMatch", "hashChainMatch", "indexConsistent"}
)

func (e MigrationEvent) value() Value {
	members := []Member{
		{"schema", String(SchemaMigrationEvent)},
		{"migrationId", String(e.MigrationID)},
		{"phase", String(string(e.Phase))},
		{"at", String(e.At)},
		{"sourcePath", String(e.SourcePath)},
		{"targetPath", String(e.TargetPath)},
		{"sourceFormat", String(string(e.SourceFormat))},
		{"targetFormat", String(string(e.TargetFormat))},
		{"verification", Object(
			Member{"entryCountMatch", Bool(e.Verification.EntryCountMatch)},
			Member{"hashChainMatch", Bool(e.Verification.HashChainMatch)},
			Member{"indexConsistent", Bool(e.Verification.IndexConsistent)},
		)},
		{"outcome", String(string(e.Outcome))},
	}
	if e.ErrorClass != "" {
		members = append(members, Member{"errorClass", String(string(e.ErrorClass))})
	}
	members = append(members, Member{"correlationId", String(e.CorrelationID)})
	return Object(members...)
}

// AppendMigrationEvent appends e as a compact line with its newline: the
// bytes AppendCompact gives e.value() (tested), written directly (a run
// writes four to nine events per session it refreshes; issue 14).
func AppendMigrationEvent(dst []byte, e MigrationEvent) []byte {
	str := func(dst []byte, key, s string) []byte {
		dst = append(dst, key...)
		return AppendString(dst, s)
	}
	flag := func(dst []byte, key string, b bool) []byte {
		dst = append(dst, key...)
		return strconv.AppendBool(dst, b)
	}
	dst = str(dst, `{"schema":`, SchemaMigrationEvent)
	dst = str(dst, `,"migrationId":`, e.MigrationID)
	dst = str(dst, `,"phase":`, string(e.Phase))
	dst = str(dst, `,"at":`, e.At)
	dst = str(dst, `,"sourcePath":`, e.SourcePath)
	dst = str(dst, `,"targetPath":`, e.TargetPath)
	dst = str(dst, `,"sourceFormat":`, string(e.SourceFormat))
	dst = str(dst, `,"targetFormat":`, string(e.TargetFormat))
	dst = flag(dst, `,"verification":{"entryCountMatch":`, e.Verification.EntryCountMatch)
	dst = flag(dst, `,"hashChainMatch":`, e.Verification.HashChainMatch)
	dst = flag(dst, `,"indexConsistent":`, e.Verification.IndexConsistent)
	dst = str(dst, `},"outcome":`, string(e.Outcome))
	if e.ErrorClass != "" {
		dst = str(dst, `,"errorClass":`, string(e.ErrorClass))
	}
	dst = str(dst, `,"correlationId":`, e.CorrelationID)
	return append(dst, '}', '\n')
}

// CheckMigrationEvent applies the reference's event rules: UUID
// migrationId, known phase, outcome, formats and error class, RFC 3339 at,
// non-empty paths, correlation-id pattern.
func CheckMigrationEvent(e MigrationEvent) error {
	fail := func(member, reason string) error { return docErr(DocMigrationEvent, member, reason) }
	switch {
	case !ValidUUID(e.MigrationID):
		return fail("migrationId", "must be a UUID")
	case !e.Phase.Valid():
		return fail("phase", "unsupported phase")
	case !ValidRFC3339(e.At):
		return fail("at", "not an RFC 3339 timestamp")
	case e.SourcePath == "":
		return fail("sourcePath", "must be non-empty")
	case e.TargetPath == "":
		return fail("targetPath", "must be non-empty")
	case !e.SourceFormat.Valid():
		return fail("sourceFormat", "unsupported format")
	case !e.TargetFormat.Valid():
		return fail("targetFormat", "unsupported format")
	case !e.Outcome.Valid():
		return fail("outcome", "unsupported outcome")
	case e.ErrorClass != "" && !e.ErrorClass.Valid():
		return fail("errorClass", "unsupported error class")
	case !ValidCorrelationID(e.CorrelationID):
		return fail("correlationId", "does not match ^[A-Za-z0-9._:-]{8,128}$")
	}
	return nil
}

// ParseMigrationEvent decodes one ledger line (with its newline) and applies
// CheckMigrationEvent. An errorClass of null reads as absent.
func ParseMigrationEvent(line []byte) (MigrationEvent, error) {
	body, err := lineBody(DocMigrationEvent, line, MaxFrameBytes)
	if err != nil {
		return MigrationEvent{}, err
	}
	v, err := parseDoc(DocMigrationEvent, body, nil)
	if err != nil {
		return MigrationEvent{}, err
	}
	d := decodeObject(DocMigrationEvent, "", v, eventNames, false)
	d.check(0, d.str(0) == SchemaMigrationEvent, "unsupported schema")
	e := MigrationEvent{
		MigrationID:  d.str(1),
		Phase:        Phase(d.str(2)),
		At:           d.str(3),
		SourcePath:   d.str(4),
		TargetPath:   d.str(5),
		SourceFormat: SourceFormat(d.str(6)),
		TargetFormat: SourceFormat(d.str(7)),
	}
	vf := d.nested(8, verificationNames, false)
	e.Verification = Verification{vf.boolean(0), vf.boolean(1), vf.boolean(2)}
	d.join(vf)
	e.Outcome = Outcome(d.str(9))
	if c, ok := d.optStr(10); ok {
		e.ErrorClass = ErrorClass(c)
	}
	e.CorrelationID = d.str(11)
	if err := d.error(); err != nil {
		return MigrationEvent{}, err
	}
	if err := CheckMigrationEvent(e); err != nil {
		return MigrationEvent{}, err
	}
	return e, nil
}
