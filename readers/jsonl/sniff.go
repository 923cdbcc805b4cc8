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
	format, h, _, err := sniffHeader(path)
	return format, h.Version, err
}

// SniffHeader is Sniff that also returns the session's id, for a JSONL
// session whose header was read without error ("" otherwise).
func SniffHeader(path string) (readers.SourceFormat, int, string, error) {
	format, h, _, err := sniffHeader(path)
	return format, h.Version, h.ID, err
}

// SniffLine is Sniff that also returns the header line it read (without
// its "\n"), for a JSONL session whose header was read without error: a
// caller that wants the header need not open the file again.
func SniffLine(path string) (readers.SourceFormat, int, []byte, error) {
	format, h, line, err := sniffHeader(path)
	return format, h.Version, line, err
}

// sniffHeader is SniffLine with the header as read (its Version only, for
// a version the reference does not read).
func sniffHeader(path string) (readers.SourceFormat, readers.Header, []byte, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return "", readers.Header{}, nil, err
	}
	defer f.Close()
	var magic [16]byte
	if n, _ := io.ReadFull(f, magic[:]); n == len(magic) && bytes.Equal(magic[:], sqliteMagic) {
		return readers.FormatSQLitev1, readers.Header{}, nil, nil
	}
	s := &Source{path: path, f: f}
	lr := normalize.NewLineReader(io.NewSectionReader(f, 0, math.MaxInt64), 4096, MaxLineBytes, false)
	line, start, err := lr.Next()
	if err == io.EOF {
		return "", readers.Header{}, nil, s.refuse(0, readers.ClassEmptyFile, "Empty JSONL session file: it has no header line", nil)
	}
	if err := s.lineProblem(lr, line, start, err); err != nil {
		return "", readers.Header{}, nil, err
	}
	err = s.readHeader(line, Options{AllowLegacy: true})
	if r := readers.AsRefused(err); r != nil && r.Class == readers.ClassUnsupportedVer {
		h, perr := normalize.ParseHeader(normalize.RustTrim(line))
		if perr == nil {
			return readers.FormatJSONLv3, readers.Header{Version: h.Version}, nil, err
		}
	}
	if err != nil {
		return "", readers.Header{}, nil, err
	}
	return readers.FormatJSONLv3, s.header, bytes.Clone(bytes.TrimSuffix(line, []byte{'\n'})), nil
}
