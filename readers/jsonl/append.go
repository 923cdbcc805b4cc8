package jsonl

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"os"

	"pisess/readers"
	"pisess/readers/normalize"
	"pisess/readers/payload"
	"pisess/writers/bufpool"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// ErrNotAppended is matched by OpenAppend's error when the file is not the
// bytes a store was built from followed by whole lines: shorter, a
// different prefix, or a prefix whose last line had no newline (pi would
// have completed that line, not appended a new one).
var ErrNotAppended = errors.New("the session is not its earlier bytes with lines appended")

// ErrNeedsWholeFile is matched by an AppendSource's error for an appended
// entry that only a read of the whole file can judge: one without an id
// (its synthesized id depends on every id in the file), a duplicate id or
// a parent that is not an earlier entry (whose refusal names lines of the
// whole file, or which a later line may yet resolve).
var ErrNeedsWholeFile = errors.New("the appended entries need a read of the whole file")

// AppendOptions say what an AppendSource continues from.
type AppendOptions struct {
	// Offset is the length of the bytes the store was built from.
	Offset int64
	// Prefix is those bytes' PrefixHash: they are proved by their XXH3
	// alone and the SHA-256 goes on from its state (of Offset bytes), so
	// that the prefix is read once but not SHA-256 hashed again.
	Prefix normalize.PrefixHash
	// Known reports whether an id belongs to an entry before Offset (or to
	// one appended and already consumed): the store's ids.
	Known func(id string) bool
}

// AppendSource streams the entries a session gained after its first
// Offset bytes: the lines after them, read as Source reads lines. It reads
// the file once: the prefix is hashed (one sequential XXH3: the cost of
// proving it unchanged) and the rest is hashed as it is parsed, so that at
// the end the digest of the whole file is known without reading it again.
type AppendSource struct {
	Source
	opt    AppendOptions
	lines  int64 // lines in the prefix
	sum, x hash.Hash
	seen   map[string]struct{}
	finger wire.SourceFingerprint
}

var _ readers.Source = (*AppendSource)(nil)

// prefixBuffers are the read buffers of the prefix hash, reused from
// refresh to refresh.
var prefixBuffers = bufpool.NewBytes(1 << 20)

// OpenAppend opens the session at path for the entries after opt.Offset.
// Its header is read again (line 1, inside the prefix); the prefix must
// hash to opt.Prefix's XXH3 and end with a newline, or the error matches
// ErrNotAppended. A header the reference refuses is a *readers.RefusedError
// as from Open.
func OpenAppend(path string, opt AppendOptions) (*AppendSource, error) {
	f, info, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	s := &AppendSource{Source: Source{path: path, f: f, info: info, size: info.Size()}, opt: opt, seen: map[string]struct{}{}}
	if err := s.open(); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func (s *AppendSource) open() error {
	if s.opt.Offset <= 0 || s.size < s.opt.Offset || s.opt.Known == nil {
		return fmt.Errorf("%s: %d bytes, the store was built from %d: %w", s.path, s.size, s.opt.Offset, ErrNotAppended)
	}
	// The header line only (a few hundred bytes; a longer one is read on
	// from there): the prefix is read whole just below.
	lr := normalize.NewLineReader(io.NewSectionReader(s.f, 0, s.opt.Offset), 4096, MaxLineBytes, false)
	line, start, err := lr.Next()
	if err := s.lineProblem(lr, line, start, err); err != nil {
		return err
	}
	if err := s.readHeader(line, Options{}); err != nil {
		return err
	}
	p := s.opt.Prefix
	if n, ok := wire.SHA256StateLength(p.SHA256State); !ok || n != uint64(s.opt.Offset) {
		return fmt.Errorf("%s: the recorded hash state is not one of its first %d bytes: %w", s.path, s.opt.Offset, ErrNotAppended)
	}
	sha, x, ok := normalize.NewPrefixHashes(p)
	if !ok {
		return fmt.Errorf("%s: the recorded hash state cannot be restored: %w", s.path, ErrNotAppended)
	}
	s.sum, s.x = sha, x
	buf := prefixBuffers.Get()
	defer prefixBuffers.Put(buf)
	var last byte
	for off := int64(0); off < s.opt.Offset; {
		n, err := s.f.ReadAt(buf[:min(int64(len(buf)), s.opt.Offset-off)], off)
		if n > 0 {
			x.Write(buf[:n]) // sha already holds the prefix
			s.lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
			last = buf[n-1]
			off += int64(n)
		}
		if err != nil && !(errors.Is(err, io.EOF) && off == s.opt.Offset) {
			return &readers.RefusedError{Path: s.path, Class: readers.ClassIO, Reason: "read: " + err.Error(), Err: err}
		}
	}
	var got [16]byte
	x.Sum(got[:0])
	switch {
	case got != p.XXH3:
		return fmt.Errorf("%s: its first %d bytes changed: %w", s.path, s.opt.Offset, ErrNotAppended)
	case last != '\n':
		return fmt.Errorf("%s: the last line of its first %d bytes had no newline: %w", s.path, s.opt.Offset, ErrNotAppended)
	}
	// The rest is hashed as the line reader consumes it.
	rest := io.TeeReader(io.NewSectionReader(s.f, s.opt.Offset, math.MaxInt64), io.MultiWriter(s.sum, s.x))
	s.lr = normalize.NewLineReader(rest, normalize.LineBufferSize, MaxLineBytes, false)
	return nil
}

// Lines is the number of lines before the appended ones.
func (s *AppendSource) Lines() int64 { return s.lines }

// Prefix is the PrefixHash of the whole file as it was read (valid when
// Fingerprint is): what the next refresh continues from.
func (s *AppendSource) Prefix() normalize.PrefixHash { return s.prefix }

// Fingerprint is the source fingerprint of the whole file as it was read:
// valid once Next has returned io.EOF (the file's size and identity were
// then checked unchanged since it was opened).
func (s *AppendSource) Fingerprint() wire.SourceFingerprint { return s.finger }

// BytesRead is the offset of the next byte to read, in the whole file.
func (s *AppendSource) BytesRead() int64 { return s.opt.Offset + s.lr.Offset() }

// Next returns the next appended entry, or io.EOF after the last; other
// errors are final: a *readers.RefusedError for a line the reference
// refuses (its line number the file's), or one matching ErrNeedsWholeFile.
func (s *AppendSource) Next() (readers.Entry, error) {
	if s.err != nil {
		return readers.Entry{}, s.err
	}
	e, err := s.next()
	if err != nil {
		s.err = err
	}
	return e, err
}

func (s *AppendSource) next() (readers.Entry, error) {
	for {
		line, start, err := s.lr.Next()
		if err == io.EOF {
			return readers.Entry{}, s.end()
		}
		n := s.lines + s.lr.Line()
		if err := s.lineProblem(s.lr, line, s.opt.Offset+start, err); err != nil {
			return readers.Entry{}, s.shift(err)
		}
		if rustTrimEmpty(line) {
			continue
		}
		e, err := s.dec.Decode(line)
		if err != nil {
			return readers.Entry{}, s.shift(s.entryRefusal(s.lr.Line(), line, err))
		}
		switch {
		case !e.HasID:
			return readers.Entry{}, fmt.Errorf("%s line %d: an entry without an id: %w", s.path, n, ErrNeedsWholeFile)
		case !payload.ValidEntryID(e.ID):
			return readers.Entry{}, s.refuse(n, readers.ClassBadEntryID, fmt.Sprintf(
				"entry id %q does not match the V2 entry-id contract ^[A-Za-z0-9_-]{1,128}$", e.ID), nil)
		case s.known(e.ID):
			return readers.Entry{}, fmt.Errorf("%s line %d: duplicate entry id %s: %w", s.path, n, e.ID, ErrNeedsWholeFile)
		case e.HasParent && !s.known(e.ParentID):
			return readers.Entry{}, fmt.Errorf("%s line %d: parent %s is not an earlier entry: %w", s.path, n, e.ParentID, ErrNeedsWholeFile)
		}
		s.seen[e.ID] = struct{}{}
		return readers.Entry{
			ID:        e.ID,
			ParentID:  e.ParentID,
			Type:      e.Type,
			Timestamp: e.Timestamp,
			Payload:   e.Canonical(),
			Position:  n,
			Role:      e.Role,
			Name:      e.Name,
		}, nil
	}
}

func (s *AppendSource) known(id string) bool {
	if _, ok := s.seen[id]; ok {
		return true
	}
	return s.opt.Known(id)
}

// shift makes a refusal's line, counted from the first appended line,
// the file's.
func (s *AppendSource) shift(err error) error {
	var r *readers.RefusedError
	if errors.As(err, &r) && r.Line > 0 {
		r.Line += s.lines
	}
	return err
}

// end checks that what was read is the whole file as opened and takes its
// fingerprint.
func (s *AppendSource) end() error {
	if err := s.unchanged(); err != nil {
		return err
	}
	if s.BytesRead() != s.size {
		return s.changed(0)
	}
	st, ok := durable.StatOf(s.info)
	if !ok {
		return s.refuse(0, readers.ClassIO, "no file identity", nil)
	}
	s.prefix = normalize.PrefixOf(s.sum, s.x)
	s.finger = wire.SourceFingerprint{
		ByteLength: uint64(s.size),
		SHA256:     hex.EncodeToString(s.sum.Sum(nil)),
		FileIdentity: &wire.FileIdentity{Device: st.Dev, Inode: st.Ino,
			ChangeTimeSeconds: st.Ctime.Sec, ChangeTimeNanoseconds: st.Ctime.Nsec},
	}
	return io.EOF
}

// Unchanged reports whether the file still has the size and identity
// (device, inode, change and modification times) it had when opened: any
// write to it moves its change time, which no one can set back, so a file
// that passes is still the bytes Fingerprint describes.
func (s *AppendSource) Unchanged() bool {
	now, err := os.Lstat(s.path)
	return err == nil && now.Size() == s.size && sameIdentity(s.info, now)
}
