package wire

import (
	"errors"
	"strings"
	"testing"
)

// TestParseFrameHead: the head of every frame AppendFrame writes reads back
// as ParseFrame reads it; any line not in AppendFrame's exact form is not
// read at all.
func TestParseFrameHead(t *testing.T) {
	for _, parent := range []string{"", "p-1_X"} {
		f := Frame{SegmentSeq: 3, FrameSeq: 12, EntrySeq: 1234, EntryID: "abc_DEF-9", ParentEntryID: parent,
			EntryType: EntryMessage, Timestamp: "2026-01-01T00:00:00.000Z"}
		f.SetPayload([]byte(`{"id":"abc_DEF-9","x":"}\n"}`))
		line := AppendFrame(nil, f)
		h, ok := ParseFrameHead(line)
		full, err := ParseFrame(line)
		if !ok || err != nil {
			t.Fatalf("parent %q: ok %v, ParseFrame %v", parent, ok, err)
		}
		want := FrameHead{SegmentSeq: full.SegmentSeq, FrameSeq: full.FrameSeq, EntrySeq: full.EntrySeq, EntryID: full.EntryID,
			ParentEntryID: full.ParentEntryID, EntryType: full.EntryType, Timestamp: full.Timestamp,
			PayloadSHA256: full.PayloadSHA256, PayloadBytes: full.PayloadBytes}
		if h != want {
			t.Errorf("head %+v, want %+v", h, want)
		}
		for name, bad := range map[string]string{
			"space":        strings.Replace(string(line), `"frameSeq":12`, `"frameSeq": 12`, 1),
			"leading zero": strings.Replace(string(line), `"frameSeq":12`, `"frameSeq":012`, 1),
			"length":       strings.Replace(string(line), `"payloadBytes":`, `"payloadBytes":1`, 1),
			"no newline":   strings.TrimSuffix(string(line), "\n"),
			"escape":       strings.Replace(string(line), `"entryId":"abc`, `"entryId":"\u0061bc`, 1),
			"bad type":     strings.Replace(string(line), `"message"`, `"messages"`, 1),
			"upper digest": strings.Replace(string(line), full.PayloadSHA256, strings.ToUpper(full.PayloadSHA256), 1),
		} {
			if _, ok := ParseFrameHead([]byte(bad)); ok {
				t.Errorf("parent %q: %s: read a line AppendFrame never writes", parent, name)
			}
		}
	}
}

// ParseFrameFast reads exactly what ParseFrame reads from a line in
// AppendFrame's form, and refuses a payload that is not the one hashed.
func TestParseFrameFast(t *testing.T) {
	f := Frame{SegmentSeq: 1, FrameSeq: 2, EntrySeq: 2, EntryID: "e2", ParentEntryID: "e1",
		EntryType: EntryCustom, Timestamp: "2026-01-01T00:00:00.000Z"}
	f.SetPayload([]byte(`{"type":"custom","id":"e2","parentId":"e1","n":[1,2.5,"x"]}`))
	line := AppendFrame(nil, f)
	fast, ok, err := ParseFrameFast(line)
	full, ferr := ParseFrame(line)
	if !ok || err != nil || ferr != nil {
		t.Fatalf("ok %v err %v, ParseFrame %v", ok, err, ferr)
	}
	if fast.EntryID != full.EntryID || fast.ParentEntryID != full.ParentEntryID || fast.EntryType != full.EntryType ||
		fast.PayloadSHA256 != full.PayloadSHA256 || string(fast.Payload) != string(full.Payload) || fast.EntrySeq != full.EntrySeq {
		t.Fatalf("fast %+v\nfull %+v", fast, full)
	}
	spoiled := []byte(strings.Replace(string(line), `2.5`, `2.6`, 1))
	if _, ok, err := ParseFrameFast(spoiled); !ok || !errors.Is(err, ErrChecksum) {
		t.Fatalf("a changed payload: ok %v err %v", ok, err)
	}
	if _, ok, _ := ParseFrameFast([]byte(strings.Replace(string(line), `"frameSeq":2`, `"frameSeq": 2`, 1))); ok {
		t.Fatal("read a line AppendFrame never writes")
	}
}
