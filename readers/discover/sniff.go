package discover

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"

	"pisess/readers"
	"pisess/readers/jsonl"
	"pisess/writers/wire"
)

// sniff tells whether the regular file at path is a session of format
// want, by its header (never by its name). ok with the header's version
// for a session, even one the reader will refuse (a bad header field, an
// unknown version, an unreadable file); !ok with the reason for a file
// that is not a session at all: empty, a first line that is not a JSON
// object of type "session", or the other format's magic. id is the
// header's session id when it was read without error.
func sniff(path string, want readers.SourceFormat) (ok bool, version int, id, reason string) {
	format, h, err := jsonl.SniffHeader(path)
	version = h.Version
	if err == nil {
		if format != want {
			return false, 0, "", fmt.Sprintf("its content is %s, not %s", format, want)
		}
		return true, version, h.ID, ""
	}
	r := readers.AsRefused(err)
	switch {
	case r == nil:
		return true, version, "", "" // not sniffable now; the reader will say why
	case r.Class == readers.ClassEmptyFile:
		return false, 0, "", "empty file: no session header"
	case want == readers.FormatSQLitev1:
		return false, 0, "", "not a SQLite database"
	case r.Class == readers.ClassUnsupportedVer || r.Class == readers.ClassIO:
		return true, version, "", ""
	}
	if !firstLineIsHeader(path) {
		return false, 0, "", "first line is not a session header: " + r.Reason
	}
	return true, version, "", ""
}

// headerProbeBytes bounds the first-line read of a file that failed to
// sniff: a header is a few hundred bytes.
const headerProbeBytes = 1 << 20

// firstLineIsHeader reports whether the file's first line is a JSON object
// whose "type" is "session": a session, even if its header is invalid.
func firstLineIsHeader(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, headerProbeBytes))
	if err != nil {
		return false
	}
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		buf = buf[:i]
	}
	v, err := wire.ParseJSON(bytes.TrimSpace(buf), nil)
	if err != nil || v.Kind != wire.KindObject {
		return false
	}
	t, ok := v.Get("type")
	return ok && t.Kind == wire.KindString && t.Str == "session"
}
