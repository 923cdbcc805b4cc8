package wire

import "strconv"

// MaxSourceStateBytes bounds source-state.json, newline included.
const MaxSourceStateBytes = 4096

// SourceState is source-state.json (FORMAT.md §8).
type SourceState struct {
	State             SourceStatus
	SourceFingerprint *SourceFingerprint // nil when dirty (member omitted)
}

// SourceFingerprint identifies the source a clean sidecar was built from.
type SourceFingerprint struct {
	ByteLength   uint64
	SHA256       string        // of the whole source file
	FileIdentity *FileIdentity // nil when unknown (member omitted)
}

// FileIdentity is the source's stat identity, sampled before hashing.
type FileIdentity struct {
	Device                uint64
	Inode                 uint64
	ChangeTimeSeconds     int64
	ChangeTimeNanoseconds int64
}

var (
	sourceStateNames = []string{"schema", "state", "sourceFingerprint"}
	fingerprintNames = []string{"byteLength", "sha256", "fileIdentity"}
	identityNames    = []string{"device", "inode", "changeTimeSeconds", "changeTimeNanoseconds"}
)

// AppendSourceState appends s as a compact line with its newline.
func AppendSourceState(dst []byte, s SourceState) []byte {
	dst = append(dst, `{"schema":"`+SchemaSourceState+`","state":`...)
	dst = AppendString(dst, string(s.State))
	if fp := s.SourceFingerprint; fp != nil {
		dst = append(dst, `,"sourceFingerprint":{"byteLength":`...)
		dst = strconv.AppendUint(dst, fp.ByteLength, 10)
		dst = append(dst, `,"sha256":`...)
		dst = AppendString(dst, fp.SHA256)
		if id := fp.FileIdentity; id != nil {
			dst = append(dst, `,"fileIdentity":{"device":`...)
			dst = strconv.AppendUint(dst, id.Device, 10)
			dst = append(dst, `,"inode":`...)
			dst = strconv.AppendUint(dst, id.Inode, 10)
			dst = append(dst, `,"changeTimeSeconds":`...)
			dst = strconv.AppendInt(dst, id.ChangeTimeSeconds, 10)
			dst = append(dst, `,"changeTimeNanoseconds":`...)
			dst = strconv.AppendInt(dst, id.ChangeTimeNanoseconds, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, '}')
	}
	return append(dst, '}', '\n')
}

// ParseSourceState decodes source-state.json as the reference reads it: at
// most 4096 bytes; unknown members ignored (its type does not deny them);
// the schema constant; state "clean" or "dirty"; a fingerprint sha256 of 64
// hex digits in either case (the reference's check is is_ascii_hexdigit; a
// digest that is not lower-case then simply never matches, so the state is
// stale unless the file identity matches first). A trailing newline is not
// required: it is white space to the parser.
func ParseSourceState(b []byte) (SourceState, error) {
	if len(b) > MaxSourceStateBytes {
		return SourceState{}, &DocError{Doc: DocSourceState, Reason: "exceeds 4096 bytes", Err: ErrTooLarge}
	}
	v, err := parseDoc(DocSourceState, b, nil)
	if err != nil {
		return SourceState{}, err
	}
	d := decodeObject(DocSourceState, "", v, sourceStateNames, true)
	schema := d.str(0)
	var s SourceState
	s.State = SourceStatus(d.str(1))
	d.check(1, s.State.Valid(), `must be "clean" or "dirty"`)
	if d.optional(2) {
		f := d.nestedValue(2, *d.val(2), fingerprintNames, true)
		fp := &SourceFingerprint{ByteLength: f.u64(0), SHA256: f.str(1)}
		if f.optional(2) {
			g := f.nestedValue(2, *f.val(2), identityNames, true)
			fp.FileIdentity = &FileIdentity{g.u64(0), g.u64(1), g.i64(2), g.i64(3)}
			f.join(g)
		}
		d.join(f)
		s.SourceFingerprint = fp
	}
	if err := d.error(); err != nil {
		return SourceState{}, err
	}
	if schema != SchemaSourceState {
		return SourceState{}, docErr(DocSourceState, "schema", "unsupported schema")
	}
	if fp := s.SourceFingerprint; fp != nil && !validAnyCaseHex64(fp.SHA256) {
		return SourceState{}, docErr(DocSourceState, "sourceFingerprint.sha256", "must contain exactly 64 hexadecimal characters")
	}
	return s, nil
}
