package wire

import (
	"strconv"
	"strings"
	"time"
)

// SegmentFileName returns "<seq as 16 zero-padded digits>.seg" (§1).
func SegmentFileName(seq uint64) string { return padded16(seq) + ".seg" }

// CheckpointFileName returns "<seq as 16 zero-padded digits>.json" (§6).
func CheckpointFileName(seq uint64) string { return padded16(seq) + ".json" }

// SnapshotRef returns a checkpoint's snapshotRef, "checkpoints/<name>".
func SnapshotRef(seq uint64) string { return FilesCheckpointDir + CheckpointFileName(seq) }

func padded16(n uint64) string {
	s := strconv.FormatUint(n, 10)
	if len(s) >= 16 {
		return s
	}
	return strings.Repeat("0", 16-len(s)) + s
}

// ParseSegmentFileName reads a segment number from a file name the way the
// reference lists segments: the extension is "seg" and the stem parses as an
// unsigned decimal (Rust's u64 parse: an optional '+', digits only). ok is
// false for a name that is not a segment at all (another extension, or a
// hidden ".seg" that has no extension); numeric is false for a *.seg whose
// stem is not a number, which the reference's resume refuses.
func ParseSegmentFileName(name string) (seq uint64, ok, numeric bool) {
	return parseSeqName(name, "seg")
}

// ParseCheckpointFileName is ParseSegmentFileName for checkpoints/*.json.
func ParseCheckpointFileName(name string) (seq uint64, ok, numeric bool) {
	return parseSeqName(name, "json")
}

func parseSeqName(name, ext string) (uint64, bool, bool) {
	dot := strings.LastIndexByte(name, '.')
	// Rust's Path::extension: none when the only dot starts the name.
	if dot <= 0 || name[dot+1:] != ext {
		return 0, false, false
	}
	stem := name[:dot]
	digits := strings.TrimPrefix(stem, "+")
	if digits == "" {
		return 0, true, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, true, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, true, false
	}
	return n, true, true
}

// TimestampLayout is the layout of every timestamp the store writes.
const TimestampLayout = "2006-01-02T15:04:05.000Z"

// FormatTimestamp returns t in UTC as RFC 3339 with milliseconds (truncated,
// as chrono's SecondsFormat::Millis does) and "Z".
func FormatTimestamp(t time.Time) string { return t.UTC().Format(TimestampLayout) }
