package discover

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"

	"pisess/readers"
	"pisess/readers/jsonl"
)

// ReadHeader returns the header of the session file at path without
// reading its entries (for a JSONL file: its first line only), checked as
// the reference checks a header it reads (any version 1 to 3: callers that
// need version 3 look at Version). For status, which judges a sidecar by
// the source's header alone. A SQLite session is opened whole (its reader
// copies the database first).
func ReadHeader(path string) (readers.Header, error) {
	if err := sourceFault("open", path); err != nil {
		return readers.Header{}, &readers.RefusedError{Path: path, Class: readers.ClassIO, Err: err,
			Reason: "open: " + (&fs.PathError{Op: "open", Path: path, Err: err}).Error()}
	}
	if filepath.Ext(path) == ExtSQLite {
		src, err := openSQLite(path)
		if err != nil {
			return readers.Header{}, err
		}
		defer src.Close()
		return src.Header(), nil
	}
	format, h, err := jsonl.SniffHeader(path)
	if err != nil {
		return readers.Header{}, err
	}
	if format != readers.FormatJSONLv3 {
		return readers.Header{}, &readers.RefusedError{Path: path, Line: 1, Class: readers.ClassBadHeader,
			Reason: fmt.Sprintf("the file holds %s, not JSONL", format)}
	}
	h.Raw = bytes.TrimSuffix(h.Raw, []byte{'\r'})
	return h, nil
}
