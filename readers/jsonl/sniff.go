package jsonl

import (
	"bytes"
	"io"
	"math"

	"pisess/readers"
	"pisess/readers/normalize"
)

// sqliteMagic starts every SQLite 3 database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// Sniff reads only the start of the file at path and tells its format: a
// SQLite database gives (FormatSQLitev1, 0, nil) without looking further;
// a JSONL session gives FormatJSONLv3 (the JSONL family) and its header's
// version (0 when the header has none, i.e. version 1). A header the
// reference cannot read, or a version other than 1 to 3, is a
// *readers.RefusedError as Open reports it (for an unknown version, the
// version is returned with it).
func Sniff(path string) (readers.SourceFormat, int, error) {
	format, h, err := SniffHeader(path)
	return format, h.Version, err
}

// SniffHeader is Sniff that also returns the header it read, for a JSONL
// session whose header was read without error (Raw is the line without
// its "\n"): a caller that wants the header need not open the file again.
// For a version the reference does not read, only Version is set.
func SniffHeader(path string) (readers.SourceFormat, readers.Header, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return "", readers.Header{}, err
	}
	defer f.Close()
	var magic [16]byte
	if n, _ := io.ReadFull(f, magic[:]); n == len(magic) && bytes.Equal(magic[:], sqliteMagic) {
		return readers.FormatSQLitev1, readers.Header{}, nil
	}
	s := &Source{path: path, f: f}
	lr := normalize.NewLineReader(io.NewSectionReader(f, 0, math.MaxInt64), 4096, MaxLineBytes, false)
	line, start, err := lr.Next()
	if err == io.EOF {
		return "", readers.Header{}, s.refuse(0, readers.ClassEmptyFile, "Empty JSONL session file: it has no header line", nil)
	}
	if err := s.lineProblem(lr, line, start, err); err != nil {
		return "", readers.Header{}, err
	}
	err = s.readHeader(line, Options{AllowLegacy: true})
	if r := readers.AsRefused(err); r != nil && r.Class == readers.ClassUnsupportedVer {
		h, perr := normalize.ParseHeader(normalize.RustTrim(line))
		if perr == nil {
			return readers.FormatJSONLv3, readers.Header{Version: h.Version}, err
		}
	}
	if err != nil {
		return "", readers.Header{}, err
	}
	h := s.header
	h.Raw = bytes.Clone(h.Raw) // the line reader's buffer
	return readers.FormatJSONLv3, h, nil
}
