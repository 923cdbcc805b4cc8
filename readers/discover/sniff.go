package discover

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"pisess/readers"
	"pisess/readers/jsonl"
	"pisess/writers/wire"
)

// sniffed is what the header of a candidate session file said.
type sniffed struct {
	// ok: the file is a session of the format wanted, even one the reader
	// will refuse (a bad header field, an unknown version), or one that
	// could not be read now (readErr).
	ok      bool
	version int
	// id is the header's session id when it was read without error.
	id string
	// reason says why a file is not a session (when !ok).
	reason string
	// readErr is set when the header could not be read at all (an I/O
	// error, a resource limit: readers.Class.Transient): nothing is known
	// of the file's content, so it is neither a session refused nor "not a
	// session"; the reader meets the error again, or not, when it opens it.
	readErr *readers.RefusedError
}

// sniff tells whether the regular file at path is a session of format
// want, by its header (never by its name); see [sniffed].
func sniff(path string, want readers.SourceFormat) sniffed {
	format, h, err := jsonl.SniffHeader(path)
	if ferr := sourceFault("sniff", path); ferr != nil && err == nil {
		err = &readers.RefusedError{Path: path, Class: readers.ClassIO, Err: ferr,
			Reason: "read: " + (&fs.PathError{Op: "read", Path: path, Err: ferr}).Error()}
	}
	if err == nil {
		if format != want {
			return sniffed{reason: fmt.Sprintf("its content is %s, not %s", format, want)}
		}
		return sniffed{ok: true, version: h.Version, id: h.ID}
	}
	r := readers.AsRefused(err)
	switch {
	case r == nil:
		return sniffed{ok: true, version: h.Version} // not sniffable now; the reader will say why
	case r.Transient():
		// Checked before the format: an unreadable .sqlite is a session
		// this run could not read (EACCES, EIO, EMFILE), not a file known
		// to hold no database.
		return sniffed{ok: true, readErr: r}
	case r.Class == readers.ClassEmptyFile:
		return sniffed{reason: "empty file: no session header"}
	case want == readers.FormatSQLitev1:
		return sniffed{reason: "not a SQLite database"}
	case r.Class == readers.ClassUnsupportedVer:
		return sniffed{ok: true, version: h.Version}
	}
	if !firstLineIsHeader(path) {
		return sniffed{reason: "first line is not a session header: " + r.Reason}
	}
	return sniffed{ok: true, version: h.Version}
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
