package wire

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxFuzzInput bounds fuzz inputs (as Prometheus's fuzzers do): the limits
// themselves are tested directly.
const maxFuzzInput = 1 << 20

func seedLines(f *testing.F, glob string, limit int) {
	paths, _ := filepath.Glob(filepath.Join(vectorsDir(f), "*", "*", "reference.v2", glob))
	n := 0
	for _, p := range paths {
		for _, l := range lines(f, p) {
			if n >= limit {
				return
			}
			f.Add(append([]byte(nil), l...))
			n++
		}
	}
}

func frameEqual(a, b Frame) bool {
	return a.SegmentSeq == b.SegmentSeq && a.FrameSeq == b.FrameSeq && a.EntrySeq == b.EntrySeq &&
		a.EntryID == b.EntryID && a.ParentEntryID == b.ParentEntryID && a.EntryType == b.EntryType &&
		a.Timestamp == b.Timestamp && a.PayloadSHA256 == b.PayloadSHA256 && a.PayloadBytes == b.PayloadBytes &&
		bytes.Equal(a.Payload, b.Payload)
}

func FuzzParseFrame(f *testing.F) {
	seedLines(f, "segments/*.seg", 300)
	f.Add([]byte(frameLine(samplePayload)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		fr, err := ParseFrame(b)
		if err != nil {
			return
		}
		out := AppendFrame(nil, fr)
		again, err := ParseFrame(out)
		if err != nil {
			t.Fatalf("re-encoding of an accepted frame is refused: %v\n%s", err, out)
		}
		if !frameEqual(fr, again) || !bytes.Equal(AppendFrame(nil, again), out) {
			t.Fatalf("round trip differs:\n%s\n%s", b, out)
		}
	})
}

func FuzzParseIndexRow(f *testing.F) {
	seedLines(f, "index/offsets.jsonl", 300)
	f.Add([]byte(sampleRow))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		r, err := ParseIndexRow(b)
		if err != nil {
			return
		}
		out := AppendIndexRow(nil, r)
		again, err := ParseIndexRow(out)
		if err != nil || again != r || !bytes.Equal(AppendIndexRow(nil, again), out) {
			t.Fatalf("round trip: %v\n%s\n%s", err, b, out)
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(vectorsDir(f), "*", "*", "reference.v2", "manifest.json"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		m, err := ParseManifest(b)
		if err != nil {
			return
		}
		out := AppendManifest(nil, m)
		again, err := ParseManifest(out)
		if err != nil || again != m || !bytes.Equal(AppendManifest(nil, again), out) {
			t.Fatalf("round trip: %v\n%s\n%s", err, b, out)
		}
	})
}

// The envelope fast path and the full parse agree on every frame line,
// but for what serde's RawValue accepts beyond a full parse (rawWider).
func FuzzFrameFastPath(f *testing.F) {
	seedLines(f, "segments/*.seg", 100)
	f.Add([]byte(frameLine(samplePayload)))
	f.Add([]byte(frameLine(`{"a":"\ud800"}`)))
	f.Add([]byte(frameLine(`{"a":[1,{"b":[]},-0.5e+3,true,null]}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		fast, ferr := parseFrame(b, true)
		slow, serr := parseFrame(b, false)
		switch {
		case ferr == nil && serr == nil:
			if !frameEqual(fast, slow) {
				t.Fatalf("fast and slow frames differ for %s", b)
			}
		case ferr != nil && serr != nil:
			if ferr.Error() != serr.Error() {
				t.Fatalf("errors differ for %s:\n fast %v\n slow %v", b, ferr, serr)
			}
		case ferr == nil:
			if !rawWider(serr) {
				t.Fatalf("only the fast path accepts %s: %v", b, serr)
			}
		default:
			t.Fatalf("only the slow path accepts %s: %v", b, ferr)
		}
	})
}

// skipValue accepts exactly what the full parser accepts, but for what
// serde's ignore_value does not check either (rawWider).
func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,2,{"b":null}]}`, `"\u00e9\n"`, `-0.0e-5`, `01`, `[1,]`, `{"a":1,}`, `"\ud83d\ude00"`, `"\ud800"`, "\"\x01\"", `tru`, ` 1 `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		end, ok := skipValue(b, 0)
		ok = ok && skipWS(b, end) == len(b) && utf8.Valid(b)
		_, err := ParseJSON(b, nil)
		if len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\t' || b[0] == '\r') {
			return // skipValue starts at a value; ParseJSON skips white space first
		}
		switch {
		case ok && err != nil:
			if !rawWider(err) {
				t.Fatalf("skipValue accepts %q, ParseJSON: %v", b, err)
			}
		case !ok && err == nil:
			t.Fatalf("ParseJSON accepts %q, skipValue does not", b)
		}
	})
}

// rawWider reports whether a full parse refused only for a reason serde's
// ignore_value does not check: a lone surrogate escape, nesting beyond the
// recursion limit, a number beyond f64 (1e700).
func rawWider(err error) bool {
	var se *SyntaxError
	return errors.As(err, &se) && (se.IsSurrogate() || se.Msg == msgRecursionLimit || se.Msg == msgNumberOutOfRange)
}

// The index-row fast path and the full parse agree on every line.
func FuzzIndexRowFastPath(f *testing.F) {
	seedLines(f, "index/offsets.jsonl", 100)
	f.Add([]byte(sampleRow))
	f.Add([]byte(strings.Replace(sampleRow, `"entrySeq":2`, `"entrySeq":2.0`, 1)))
	f.Add([]byte(strings.Replace(sampleRow, `"entryId":"b2c3d4e5"`, `"entryId":"b2c3\u0064e5"`, 1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		fast, ferr := parseIndexRow(b, true)
		slow, serr := parseIndexRow(b, false)
		if (ferr == nil) != (serr == nil) || fast != slow || (ferr != nil && ferr.Error() != serr.Error()) {
			t.Fatalf("fast and slow differ for %s:\n fast %+v %v\n slow %+v %v", b, fast, ferr, slow, serr)
		}
	})
}

// The canonical-form scan accepts only lines the full parse accepts, with
// the same row, and every line AppendIndexRow writes.
func FuzzIndexRowScan(f *testing.F) {
	seedLines(f, "index/offsets.jsonl", 100)
	f.Add([]byte(sampleRow))
	for _, r := range [][2]string{
		{`"entrySeq":2`, `"entrySeq":02`},
		{`"entrySeq":2`, `"entrySeq":0`},
		{`"entrySeq":2`, `"entrySeq":18446744073709551616`},
		{`"entryId":"b2c3d4e5"`, `"entryId":"b2c3\u0064e5"`},
		{`"entryId":"b2c3d4e5"`, `"entryId":"b2c3.4e5"`},
		{`"state":"active"`, `"state":"deleted"`},
		{`"byteLength":`, `"byteLength": `},
	} {
		f.Add([]byte(strings.Replace(sampleRow, r[0], r[1], 1)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		full, err := parseIndexRow(b, true)
		scanned, ok := ScanCanonicalIndexRow(b)
		if ok && (err != nil || scanned != full) {
			t.Fatalf("the scan accepts %q as %+v; the full parse gives %+v, %v", b, scanned, full, err)
		}
		if err == nil && bytes.Equal(AppendIndexRow(nil, full), b) && !ok {
			t.Fatalf("the scan refuses a line in AppendIndexRow's form: %q", b)
		}
		// The id alone, of every row the scan accepts, is the scan's.
		if id, idOK := IndexRowEntryID(b); ok && (!idOK || id != scanned.EntryID) {
			t.Fatalf("IndexRowEntryID(%q) = %q, %v; the scan gives %q", b, id, idOK, scanned.EntryID)
		}
	})
}

// AppendMigrationEvent writes exactly what the general encoder writes of
// the event's value, whatever its strings hold (escapes, non-ASCII,
// invalid UTF-8).
func FuzzMigrationEventEncoding(f *testing.F) {
	f.Add("0b6ee6a0-3f37-4d6c-9a52-6e1c9f8e2b11", "2026-01-01T00:00:00.000Z", "a/b.jsonl", "a/b.v2", "run:1", "io_failure", true, false)
	f.Add("x", "t", "dir \"quoted\"\\\n\u2028é", "\xff\xfe", "", "", false, true)
	f.Fuzz(func(t *testing.T, id, at, src, dst, cid, class string, a, b bool) {
		e := MigrationEvent{MigrationID: id, Phase: PhaseCompleted, At: at, SourcePath: src, TargetPath: dst,
			SourceFormat: FormatJSONLv3, TargetFormat: FormatNativeV2, Verification: Verification{a, b, a != b},
			Outcome: OutcomeOK, ErrorClass: ErrorClass(class), CorrelationID: cid}
		want := append(AppendCompact(nil, e.value()), '\n')
		if got := AppendMigrationEvent(nil, e); !bytes.Equal(got, want) {
			t.Fatalf("AppendMigrationEvent:\n%q\nthe general encoder:\n%q", got, want)
		}
	})
}

// FuzzManifestCompactEncoding: the direct compact encoder of a manifest
// writes the general encoder's bytes of its value, strings escaped and
// numbers, flags and members in the same order.
func FuzzManifestCompactEncoding(f *testing.F) {
	f.Add("0b6ee6a0-3f37-4d6c-9a52-6e1c9f8e2b11", "2026-01-01T00:00:00.000Z", "abcd1234", "F19CE559", uint64(3), uint64(1<<63), uint8(0x55))
	f.Add("x", "dir \"quoted\"\\\n\u2028\xff", "", "", uint64(0), uint64(0), uint8(0))
	f.Fuzz(func(t *testing.T, id, at, head, crc string, n, big uint64, inv uint8) {
		m := Manifest{SessionID: id, SourceFormat: FormatJSONLv3, CreatedAt: at, UpdatedAt: at + "z",
			Head:       Head{SegmentSeq: n, EntrySeq: big, EntryID: head},
			Counters:   Counters{EntriesTotal: big, MessagesTotal: n, BranchesTotal: n + 1, CompactionsTotal: big / 3, BytesTotal: ^n},
			Files:      StoreFiles(n),
			Integrity:  Integrity{ChainHash: head + crc, ManifestHash: crc + head, LastCRC32C: crc},
			Invariants: Invariants{inv&1 != 0, inv&2 != 0, inv&4 != 0, inv&8 != 0, inv&16 != 0, inv&32 != 0, inv&64 != 0}}
		want := AppendCompact(nil, m.value())
		if got := AppendManifestCompact(nil, m); !bytes.Equal(got, want) {
			t.Fatalf("AppendManifestCompact:\n%q\nthe general encoder:\n%q", got, want)
		}
	})
}
