// Package nativev2 reads a Session Store V2 store as a readers.Source: the
// header from its manifest, the entries from its frames in entry order,
// through package store's streaming iterator (so the index rules pi's
// resume enforces hold for every entry read). Payloads are returned exactly
// as stored; each is also decoded with the reference's typed model
// (readers/payload) to fill the entry's timestamp, role and name, and to
// check it names the frame's id, parent and type, as the reference's
// verification requires (FORMAT.md §9). At the end the entry count and the
// hash chain are compared with the manifest's.
//
// It never writes, and takes no lock: a caller reading a live store holds
// the store mutation lock itself.
package nativev2

import (
	"errors"
	"fmt"
	"io"

	"pisess/readers"
	"pisess/readers/payload"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// Source streams the entries of one V2 store. It is not safe for
// concurrent use.
type Source struct {
	dir      string
	manifest wire.Manifest
	header   readers.Header
	it       *store.Iterator
	chain    string
	count    uint64
	err      error // sticky: io.EOF or the error that ended the stream
}

var _ readers.Source = (*Source)(nil)

// Open opens the store at dir and reads its manifest. A store without a
// valid manifest is refused (class corrupt): without it there is no session
// id, and nothing says the frames are complete.
func Open(dir string) (*Source, error) {
	st, err := store.Open(dir, store.ReadOptions{})
	if err != nil {
		return nil, err
	}
	m, err := st.Manifest()
	if err != nil {
		return nil, refusal(dir, 0, "the store has no valid manifest.json", err)
	}
	return &Source{
		dir:      dir,
		manifest: m,
		header: readers.Header{
			ID:     m.SessionID,
			Format: readers.FormatNativeV2,
			// The store does not keep the source's header line; its
			// payloads are entries of the version-3 model.
			Version: 3,
		},
		it:    st.Entries(),
		chain: wire.ChainGenesis,
	}, nil
}

// Header returns the session header: ID is the manifest's sessionId, Format
// native_v2; Timestamp, Cwd and ParentSession are not kept by a store and
// are empty.
func (s *Source) Header() readers.Header { return s.header }

// Manifest returns the store's manifest as read by Open.
func (s *Source) Manifest() wire.Manifest { return s.manifest }

// Next returns the next entry: ID, ParentID and Type from the frame,
// Payload a copy of the frame's payload bytes, Position the entrySeq.
func (s *Source) Next() (readers.Entry, error) {
	if s.err != nil {
		return readers.Entry{}, s.err
	}
	e, err := s.next()
	if err != nil {
		s.err = err
		s.it.Close()
	}
	return e, err
}

func (s *Source) next() (readers.Entry, error) {
	if !s.it.Next() {
		if err := s.it.Err(); err != nil {
			var ce *store.CorruptionError
			if errors.As(err, &ce) {
				return readers.Entry{}, refusal(s.dir, int64(s.count+1), "the store is damaged", err)
			}
			return readers.Entry{}, err
		}
		return readers.Entry{}, s.finish()
	}
	f := s.it.Frame()
	seq := int64(f.EntrySeq)
	p := append([]byte(nil), f.Payload...)
	e, err := payload.Decode(p)
	if err != nil {
		return readers.Entry{}, refusal(s.dir, seq, "the payload is not an entry of the reference's model", err)
	}
	if e.ID != f.EntryID || e.ParentID != f.ParentEntryID || e.Type != string(f.EntryType) {
		return readers.Entry{}, refusal(s.dir, seq, fmt.Sprintf(
			"the payload (id %q, parentId %q, type %q) does not match its frame (entryId %q, parentEntryId %q, entryType %q)",
			e.ID, e.ParentID, e.Type, f.EntryID, f.ParentEntryID, f.EntryType), nil)
	}
	s.count++
	s.chain = wire.ChainStep(s.chain, f.PayloadSHA256)
	return readers.Entry{
		ID:        f.EntryID,
		ParentID:  f.ParentEntryID,
		Type:      string(f.EntryType),
		Timestamp: e.Timestamp,
		Payload:   p,
		Position:  seq,
		Role:      e.Role,
		Name:      e.Name,
	}, nil
}

// finish compares what was read with the manifest: a store whose frames
// end early or differ from what its manifest promises is refused.
func (s *Source) finish() error {
	m := s.manifest
	switch {
	case s.count != m.Counters.EntriesTotal:
		return refusal(s.dir, 0, fmt.Sprintf("the store holds %d entries, its manifest says %d", s.count, m.Counters.EntriesTotal), nil)
	case s.chain != m.Integrity.ChainHash:
		return refusal(s.dir, 0, fmt.Sprintf("the hash chain over the frames is %s, the manifest says %s", s.chain, m.Integrity.ChainHash), nil)
	}
	return io.EOF
}

// Close releases the open files.
func (s *Source) Close() error { return s.it.Close() }

func refusal(dir string, seq int64, reason string, err error) error {
	if err != nil {
		reason += ": " + err.Error()
	}
	return &readers.RefusedError{Path: dir, Line: seq, Class: readers.ClassCorrupt, Reason: reason, Err: err}
}
