package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

const sampleFrame = `{"schema":"pi.session_store_v2.segment_frame.v1","segmentSeq":1,"frameSeq":2,"entrySeq":2,"entryId":"b2c3d4e5","parentEntryId":"a1b2c3d4","entryType":"custom","timestamp":"2026-01-01T00:00:00.000Z","payloadSha256":"%SHA%","payloadBytes":%LEN%,"payload":%P%}` + "\n"

const samplePayload = `{"customType":"t","id":"b2c3d4e5","parentId":"a1b2c3d4","timestamp":"2026-01-05T10:00:00.000Z","type":"custom"}`

func frameLine(payload string) string {
	s := strings.Replace(sampleFrame, "%SHA%", PayloadSHA256([]byte(payload)), 1)
	s = strings.Replace(s, "%LEN%", itoa(len(payload)), 1)
	return strings.Replace(s, "%P%", payload, 1)
}

func itoa(n int) string { return string(AppendCompact(nil, U64(uint64(n)))) }

const sampleRow = `{"schema":"pi.session_store_v2.offset_index.v1","entrySeq":2,"entryId":"b2c3d4e5","segmentSeq":1,"frameSeq":2,"byteOffset":487,"byteLength":1045,"crc32c":"8A7FDEC7","state":"active"}` + "\n"

func TestSampleLinesRoundTrip(t *testing.T) {
	line := frameLine(samplePayload)
	f, err := ParseFrame([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendFrame(nil, f)); got != line {
		t.Fatalf("%s", got)
	}
	r, err := ParseIndexRow([]byte(sampleRow))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendIndexRow(nil, r)); got != sampleRow {
		t.Fatalf("%s", got)
	}
}

// Each mutation of a valid line must be refused with a *DocError naming
// the member.
func TestStrictFrameDecoding(t *testing.T) {
	line := frameLine(samplePayload)
	cases := []struct {
		name, from, to, member string
	}{
		{"unknown member", `"entryType"`, `"extra":1,"entryType"`, "extra"},
		{"duplicate member", `"entryType":"custom"`, `"entryType":"custom","entryType":"custom"`, "entryType"},
		{"missing member", `"frameSeq":2,`, ``, "frameSeq"},
		{"float in u64", `"frameSeq":2`, `"frameSeq":2.0`, "frameSeq"},
		{"exponent in u64", `"frameSeq":2`, `"frameSeq":2e0`, "frameSeq"},
		{"negative in u64", `"frameSeq":2`, `"frameSeq":-2`, "frameSeq"},
		{"u64 overflow", `"frameSeq":2`, `"frameSeq":18446744073709551616`, "frameSeq"},
		{"zero frameSeq", `"frameSeq":2`, `"frameSeq":0`, "frameSeq"},
		{"string for a number", `"frameSeq":2`, `"frameSeq":"2"`, "frameSeq"},
		{"wrong schema", `segment_frame.v1`, `segment_frame.v2`, "schema"},
		{"bad entry id", `"entryId":"b2c3d4e5"`, `"entryId":"b2c3 d4e5"`, "entryId"},
		{"bad parent id", `"parentEntryId":"a1b2c3d4"`, `"parentEntryId":""`, "parentEntryId"},
		{"unknown entry type", `"entryType":"custom"`, `"entryType":"custom_message"`, "entryType"},
		{"bad timestamp", `2026-01-01T00:00:00.000Z`, `2026-02-30T00:00:00.000Z`, "timestamp"},
		{"timestamp without zone", `2026-01-01T00:00:00.000Z`, `2026-01-01T00:00:00.000 `, "timestamp"},
		{"payloadBytes off", `"payloadBytes":` + itoa(len(samplePayload)), `"payloadBytes":` + itoa(len(samplePayload)+1), "payloadBytes"},
		{"missing payload", `,"payload":` + samplePayload, ``, "payload"},
		{"not an object", line[:len(line)-1], `[1,2]`, ""},
	}
	for _, c := range cases {
		bad := strings.Replace(line, c.from, c.to, 1)
		if bad == line {
			t.Fatalf("%s: no change", c.name)
		}
		_, err := ParseFrame([]byte(bad))
		var de *DocError
		if !errors.As(err, &de) || de.Doc != DocFrame || de.Member != c.member {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	for name, bad := range map[string]string{
		"no newline":       line[:len(line)-1],
		"trailing bytes":   line[:len(line)-1] + "x\n",
		"two values":       line[:len(line)-1] + "{}\n",
		"payload tampered": strings.Replace(line, `"customType":"t"`, `"customType":"u"`, 1),
		"torn":             line[:len(line)/2] + "\n",
	} {
		if _, err := ParseFrame([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// What serde accepts is accepted: null for an absent parent, members in
	// any order, white space, a CR before the newline.
	for name, ok := range map[string]string{
		"null parent":   strings.Replace(line, `"parentEntryId":"a1b2c3d4"`, `"parentEntryId":null`, 1),
		"reordered":     strings.Replace(strings.Replace(line, `"frameSeq":2,`, ``, 1), `"entrySeq"`, `"frameSeq":2,"entrySeq"`, 1),
		"white space":   strings.Replace(strings.Replace(line, `,"entryType"`, ` , "entryType"`, 1), "}\n", "} \r\n", 1),
		"leap second":   strings.Replace(line, `00:00:00.000Z`, `23:59:60.5+01:00`, 1),
		"escaped id":    strings.Replace(line, `"entryId":"b2c3d4e5"`, `"entryId":"b2c3d4\u0065\u0035"`, 1),
		"lower-case tz": strings.Replace(line, `00.000Z`, `00.000z`, 1),
	} {
		f, err := ParseFrame([]byte(ok))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(f.Payload, []byte(samplePayload)) {
			t.Errorf("%s: payload %s", name, f.Payload)
		}
	}
}

func TestStrictIndexRowDecoding(t *testing.T) {
	for name, c := range map[string][3]string{
		"state compacted":    {`"state":"active"`, `"state":"compacted"`, "state"},
		"lower-case crc":     {`"crc32c":"8A7FDEC7"`, `"crc32c":"8a7fdec7"`, "crc32c"},
		"short crc":          {`"crc32c":"8A7FDEC7"`, `"crc32c":"8A7FDEC"`, "crc32c"},
		"zero length":        {`"byteLength":1045`, `"byteLength":0`, "byteLength"},
		"length over 100MiB": {`"byteLength":1045`, `"byteLength":104857601`, "byteLength"},
		"zero entrySeq":      {`"entrySeq":2`, `"entrySeq":0`, "entrySeq"},
		"zero segmentSeq":    {`"segmentSeq":1`, `"segmentSeq":0`, "segmentSeq"},
		"unknown member":     {`"state"`, `"x":null,"state"`, "x"},
		"missing crc":        {`"crc32c":"8A7FDEC7",`, ``, "crc32c"},
		"long entry id":      {`"entryId":"b2c3d4e5"`, `"entryId":"` + strings.Repeat("a", 129) + `"`, "entryId"},
	} {
		bad := strings.Replace(sampleRow, c[0], c[1], 1)
		_, err := ParseIndexRow([]byte(bad))
		var de *DocError
		if !errors.As(err, &de) || de.Member != c[2] {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ParseIndexRow([]byte(strings.Replace(sampleRow, `"byteLength":1045`, `"byteLength":104857600`, 1))); err != nil {
		t.Errorf("exactly 100 MiB: %v", err)
	}
}

func TestManifestDecoding(t *testing.T) {
	m := Manifest{
		SessionID: "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b", SourceFormat: FormatJSONLv3,
		CreatedAt: "2026-01-01T00:00:00.000Z", UpdatedAt: "2026-01-01T00:00:00.000Z",
		Head: Head{1, 2, "b2c3d4e5"}, Counters: Counters{2, 1, 0, 0, 900}, Files: StoreFiles(1),
		Integrity: Integrity{ChainHash: strings.Repeat("a", 64), LastCRC32C: "8A7FDEC7"}, Invariants: AllInvariants(),
	}
	sign := func(m Manifest) []byte {
		m.Integrity.ManifestHash = ManifestHash(m)
		return AppendManifest(nil, m)
	}
	good := sign(m)
	got, err := ParseManifest(good)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(AppendManifest(nil, got), good) {
		t.Fatal("round trip")
	}
	// A false invariant is a finding, not a malformed document.
	iv := m
	iv.Invariants.HashChainValid = false
	if got, err := ParseManifest(sign(iv)); err != nil || got.Invariants.False()[0] != "hashChainValid" {
		t.Fatalf("%v", err)
	}
	for name, edit := range map[string]func(*Manifest){
		"session id":         func(m *Manifest) { m.SessionID = "my-custom-session-id" },
		"format":             func(m *Manifest) { m.SourceFormat = "jsonl" },
		"empty coupling":     func(m *Manifest) { m.Counters.EntriesTotal = 0 },
		"non-empty coupling": func(m *Manifest) { m.Files.SegmentCount = 0 },
		"head id":            func(m *Manifest) { m.Head.EntryID = "" },
		"chain hash":         func(m *Manifest) { m.Integrity.ChainHash = strings.Repeat("A", 64) },
		"last crc":           func(m *Manifest) { m.Integrity.LastCRC32C = "8a7fdec7" },
		"index path":         func(m *Manifest) { m.Files.IndexPath = "index/offsets.json" },
		"created at":         func(m *Manifest) { m.CreatedAt = "2026-01-01" },
	} {
		bad := m
		edit(&bad)
		if _, err := ParseManifest(sign(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	tampered := bytes.Replace(good, []byte(`"messagesTotal": 1`), []byte(`"messagesTotal": 0`), 1)
	if _, err := ParseManifest(tampered); !errors.Is(err, ErrChecksum) {
		t.Errorf("tampered: %v", err)
	}
	if _, err := ParseManifest(bytes.Replace(good, []byte(`"storeVersion": 2`), []byte(`"storeVersion": 256`), 1)); err == nil {
		t.Error("storeVersion 256")
	}
	// The hash is of the re-serialization, not of the bytes: compact is fine.
	v, _ := ParseJSON(good, nil)
	if _, err := ParseManifest(AppendCompact(nil, v)); err != nil {
		t.Errorf("compact: %v", err)
	}
	big := append(append([]byte{}, good[:len(good)-1]...), bytes.Repeat([]byte(" "), MaxDocumentBytes)...)
	if _, err := ParseManifest(append(big, '}')); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over 1 MiB: %v", err)
	}
}

func TestOtherDocumentsRoundTrip(t *testing.T) {
	c := Checkpoint{CheckpointSeq: 3, At: "2026-01-01T00:00:00.000Z", HeadEntrySeq: 7, HeadEntryID: "e1f2a3b4",
		SnapshotRef: SnapshotRef(3), ChainHash: strings.Repeat("0", 64), Reason: ReasonPostMigration}
	cb := AppendCheckpoint(nil, c)
	if !bytes.HasPrefix(cb, []byte("{\n  \"schema\": \"pi.session_store_v2.checkpoint.v1\",\n  \"checkpointSeq\": 3,")) || cb[len(cb)-1] != '}' {
		t.Fatalf("%s", cb)
	}
	if got, err := ParseCheckpoint(cb); err != nil || got != c {
		t.Fatalf("%+v %v", got, err)
	}
	bad := c
	bad.SnapshotRef = "checkpoints/3.json"
	if _, err := ParseCheckpoint(AppendCheckpoint(nil, bad)); err == nil {
		t.Error("non-canonical snapshotRef")
	}

	ev := MigrationEvent{MigrationID: "0B6EE6A03F374D6C9A526E1C9F8E2B11", Phase: PhaseRollback, At: "2026-01-01T00:00:00.000+02:00",
		SourcePath: "checkpoints/0000000000000003.json", TargetPath: "/s.v2", SourceFormat: FormatNativeV2, TargetFormat: FormatNativeV2,
		Verification: Verification{true, false, true}, Outcome: OutcomeFatalError, ErrorClass: ErrorClassAtomicityViolation, CorrelationID: "a.b_c:d-e"}
	eb := AppendMigrationEvent(nil, ev)
	if got, err := ParseMigrationEvent(eb); err != nil || got != ev {
		t.Fatalf("%+v %v", got, err)
	}
	ev.ErrorClass = ""
	eb = AppendMigrationEvent(nil, ev)
	if bytes.Contains(eb, []byte("errorClass")) {
		t.Fatal("absent errorClass written")
	}
	withNull := bytes.Replace(eb, []byte(`,"correlationId"`), []byte(`,"errorClass":null,"correlationId"`), 1)
	if got, err := ParseMigrationEvent(withNull); err != nil || got != ev {
		t.Fatalf("null errorClass: %v", err)
	}
	for name, edit := range map[string]func(*MigrationEvent){
		"correlation id": func(e *MigrationEvent) { e.CorrelationID = "1234567" },
		"migration id":   func(e *MigrationEvent) { e.MigrationID = "x" },
		"phase":          func(e *MigrationEvent) { e.Phase = "done" },
		"error class":    func(e *MigrationEvent) { e.ErrorClass = "oops" },
		"empty path":     func(e *MigrationEvent) { e.SourcePath = "" },
	} {
		bad := ev
		edit(&bad)
		if _, err := ParseMigrationEvent(AppendMigrationEvent(nil, bad)); err == nil {
			t.Errorf("event %s: accepted", name)
		}
	}

	s := SourceState{State: SourceClean, SourceFingerprint: &SourceFingerprint{ByteLength: 9, SHA256: strings.Repeat("f", 64),
		FileIdentity: &FileIdentity{1, 2, -3, 4}}}
	sb := AppendSourceState(nil, s)
	got, err := ParseSourceState(sb)
	if err != nil || *got.SourceFingerprint.FileIdentity != *s.SourceFingerprint.FileIdentity || !bytes.Equal(AppendSourceState(nil, got), sb) {
		t.Fatalf("%v", err)
	}
	// The reference ignores unknown members here and accepts upper-case hex.
	loose := bytes.Replace(sb, []byte(`"state"`), []byte(`"future":[1],"state"`), 1)
	loose = bytes.ReplaceAll(loose, []byte("ffff"), []byte("FFFF"))
	if _, err := ParseSourceState(loose); err != nil {
		t.Errorf("loose: %v", err)
	}
	for name, b := range map[string]string{
		"schema":  `{"schema":"x","state":"dirty"}`,
		"state":   `{"schema":"pi.session_store_v2.source_state.v1","state":"Dirty"}`,
		"sha":     `{"schema":"pi.session_store_v2.source_state.v1","state":"clean","sourceFingerprint":{"byteLength":1,"sha256":"abc"}}`,
		"too big": `{"schema":"pi.session_store_v2.source_state.v1","state":"dirty"}` + strings.Repeat(" ", 4096),
	} {
		if _, err := ParseSourceState([]byte(b)); err == nil {
			t.Errorf("source state %s: accepted", name)
		}
	}

	r := RollbackIntent{Checkpoint: c, MigrationID: "0b6ee6a0-3f37-4d6c-9a52-6e1c9f8e2b11", CorrelationID: "rollback-0001",
		RetainedIndexSHA256: strings.Repeat("1", 64), RetainedIndexBytes: 1234,
		Manifest: &IntentManifest{SessionID: "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b", SourceFormat: FormatJSONLv3, CreatedAt: "2026-01-01T00:00:00.000Z"}}
	rb := AppendRollbackIntent(nil, r)
	gotR, err := ParseRollbackIntent(rb)
	if err != nil || gotR.Checkpoint != c || *gotR.Manifest != *r.Manifest || !bytes.Equal(AppendRollbackIntent(nil, gotR), rb) {
		t.Fatalf("%v", err)
	}
	r.Manifest, r.RetainedIndexBytes = nil, 0
	if _, err := ParseRollbackIntent(AppendRollbackIntent(nil, r)); err == nil {
		t.Error("retainedIndexBytes 0 accepted")
	}
}

func TestPatterns(t *testing.T) {
	for s, ok := range map[string]bool{
		"2026-01-01T00:00:00.000Z":        true,
		"2026-01-01t00:00:00Z":            true,
		"2026-01-01 00:00:00+05:30":       true,
		"2024-02-29T23:59:60.123456789Z":  true,
		"2026-01-01T00:00:00.0000000001Z": true,
		"2026-01-01T00:00:00\u221205:00":  true,
		"2023-02-29T00:00:00Z":            false,
		"2026-01-01T24:00:00Z":            false,
		"2026-01-01T00:00:00":             false,
		"2026-01-01T00:00:00.Z":           false,
		"2026-01-01T00:00:00+24:00":       false,
		"2026-01-01T00:00:00+05:60":       false,
		"2026-01-01T00:00:00+0530":        false,
		"2026-1-01T00:00:00Z":             false,
		"2026-01-01T00:00:00Z ":           false,
		"":                                false,
	} {
		if ValidRFC3339(s) != ok {
			t.Errorf("RFC 3339 %q: want %v", s, ok)
		}
	}
	for s, ok := range map[string]bool{
		"3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b":          true,
		"3F2B8C1E9A4D4E6F8B2A1C5D7E9F0A1B":              true,
		"{3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b}":        true,
		"urn:uuid:3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b": true,
		"{3f2b8c1e9a4d4e6f8b2a1c5d7e9f0a1b}":            false,
		"3f2b8c1e-9a4d-4e6f-8b2a1c5d7e9f0a1b-":          false,
		"3f2b8c1g-9a4d-4e6f-8b2a-1c5d7e9f0a1b":          false,
		"my-custom-session-id":                          false,
	} {
		if ValidUUID(s) != ok {
			t.Errorf("UUID %q: want %v", s, ok)
		}
	}
	if !ValidEntryID(strings.Repeat("a", 128)) || ValidEntryID(strings.Repeat("a", 129)) || ValidEntryID("é") || ValidEntryID("") {
		t.Error("entry id")
	}
	if !ValidCorrelationID("abc.def:1") || ValidCorrelationID("abc def:1") || ValidCorrelationID("1234567") {
		t.Error("correlation id")
	}
	if CRC32C([]byte("123456789")) != "E3069283" {
		t.Error("CRC-32C check value")
	}
	if SegmentFileName(1) != "0000000000000001.seg" || CheckpointFileName(12345678901234567) != "12345678901234567.json" {
		t.Error("names")
	}
	for name, want := range map[string][3]bool{
		"0000000000000001.seg":     {true, true, true},
		"+7.seg":                   {true, true, true},
		"x.seg":                    {false, true, false},
		".seg":                     {false, false, false},
		"0000000000000001.seg.bak": {false, false, false},
	} {
		seq, ok, numeric := ParseSegmentFileName(name)
		if ok != want[1] || numeric != want[2] || (want[0] && seq == 0) {
			t.Errorf("%s: %d %v %v", name, seq, ok, numeric)
		}
	}
}

// skipString stops at a quote, backslash or control character at any
// position of its eight-byte steps, and agrees with the parser.
func TestSkipStringEveryPosition(t *testing.T) {
	for n := 0; n < 24; n++ {
		for _, c := range []string{`"`, `\n`, "\x1f", "\x00", `\u00e9`, "é", "\x7f", "\u2028"} {
			body := strings.Repeat("a", n) + c + strings.Repeat("b", 9)
			s := `"` + body + `"`
			end, ok := skipString([]byte(s), 1)
			_, err := ParseJSON([]byte(s), nil)
			if c == `"` {
				// The string ends early; the rest is trailing garbage.
				if !ok || end != n+2 {
					t.Fatalf("%q: end %d ok %v", s, end, ok)
				}
				continue
			}
			if ok != (err == nil) || ok && end != len(s) {
				t.Fatalf("%q: end %d ok %v, parser %v", s, end, ok, err)
			}
		}
	}
}
