package discover

import (
	"io/fs"
	"path/filepath"

	"pisess/readers"
	"pisess/readers/jsonl"
)

// OpenSource opens the session file at path with the reader of its format,
// chosen by extension (FORMAT.md §10): a *jsonl.Source for .jsonl (version
// 3 only, as the reference migrates). Refusals are *readers.RefusedError.
func OpenSource(path string) (readers.Source, error) { return openSource(path, jsonl.Options{}) }

func openSource(path string, opt jsonl.Options) (readers.Source, error) {
	if err := sourceFault("open", path); err != nil {
		return nil, &readers.RefusedError{Path: path, Class: readers.ClassIO, Err: err,
			Reason: "open: " + (&fs.PathError{Op: "open", Path: path, Err: err}).Error()}
	}
	switch filepath.Ext(path) {
	case ExtJSONL:
		src, err := jsonl.Open(path, opt)
		if err != nil {
			return nil, err
		}
		return src, nil
	case ExtSQLite:
		return openSQLite(path)
	}
	return nil, &readers.RefusedError{Path: path, Class: readers.ClassBadHeader,
		Reason: "not a session file: the extension is neither " + ExtJSONL + " nor " + ExtSQLite}
}

// Open opens the session's source, or returns its refusal.
func (s *Session) Open() (readers.Source, error) {
	if s.Refusal != nil {
		return nil, s.Refusal
	}
	return OpenSource(s.Path)
}

// OpenToMigrate is Open for a caller that reads every entry: a JSONL
// source then decodes each entry once (jsonl.Options.Light), and the
// reference's refusal of an entry may come from Next rather than here.
func (s *Session) OpenToMigrate() (readers.Source, error) {
	if s.Refusal != nil {
		return nil, s.Refusal
	}
	return openSource(s.Path, jsonl.Options{Light: true})
}
