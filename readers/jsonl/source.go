package jsonl

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"syscall"

	"pisess/readers"
	"pisess/readers/normalize"
	"pisess/readers/payload"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// Options says which sessions a Source reads.
type Options struct {
	// AllowLegacy reads version-1 and version-2 sessions too (pisess
	// upgrade, inspection). Migration leaves it false: the reference
	// migrates version 3 only.
	AllowLegacy bool
	// Light makes pass 1 read of each entry only what links the entries
	// (its id and parent, scanLinkIDs) and leaves the typed check to pass
	// 2, which decodes every entry anyway (issue 14: one decode per entry,
	// not two). The refusal is still the one the reference would give:
	// pass 1 starts over as a full pass at the first problem it meets, and
	// pass 2 refuses the first entry the model does not accept (from Next,
	// not Open). Migration uses it; inspection does not.
	Light bool
}

// Source streams the entries of one JSONL session. It is not safe for
// concurrent use.
type Source struct {
	path   string
	f      *os.File
	info   os.FileInfo
	header readers.Header
	size   int64
	digest [32]byte
	prefix normalize.PrefixHash
	graph  *normalize.Builder
	lr     *normalize.LineReader // pass 2
	err    error                 // sticky: io.EOF, the refusal that ended the stream, or os.ErrClosed
	// readAtClose is BytesRead once Close has released the line reader.
	readAtClose int64
	// dec decodes the lines of both passes and fdec those fetch re-reads:
	// a Decoder's entry lives until its next Decode, and fetch runs while
	// a pass-2 entry is still being resolved.
	dec, fdec payload.Decoder
	// light: pass 1 was light (Options.Light), so pass 2 is the first to
	// decode the entries.
	light bool
}

var _ readers.Source = (*Source)(nil)

// Open opens the session at path and checks all of it (pass 1): any reason
// the reference would refuse the session is returned here as a
// *readers.RefusedError, positioned at its line (with Options.Light, a
// refusal of one entry's content comes from Next instead).
func Open(path string, opt Options) (*Source, error) {
	f, info, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	s := &Source{path: path, f: f, info: info}
	s.startPass1()
	err = s.scan(opt)
	if err != nil && opt.Light {
		// Whatever the light pass met, the full pass names the line and
		// reason the reference would.
		s.lr.Release()
		s.startPass1()
		opt.Light = false
		err = s.scan(opt)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	s.light = opt.Light
	// Pass 1 checked that every line is valid UTF-8 (lineProblem), and
	// pass 2 reads the same bytes (see below).
	s.dec.ValidUTF8 = true
	// Pass 2 reads through pass 1's buffers, and is not hashed: the file's
	// status, unchanged from its open to the end of pass 2, proves it
	// read the bytes pass 1 hashed (as pi's own freshness check trusts
	// the file identity without hashing, FORMAT.md §8).
	s.lr.Restart(io.NewSectionReader(f, 0, math.MaxInt64), false)
	return s, nil
}

func (s *Source) startPass1() {
	s.graph = &normalize.Builder{Path: s.path, Unit: "line"}
	s.lr = normalize.NewLineReader(io.NewSectionReader(s.f, 0, math.MaxInt64), normalize.LineBufferSize, MaxLineBytes, true)
}

// Header returns the session header.
func (s *Source) Header() readers.Header { return s.header }

// Branches counts the entries with two or more children (readers.Linked):
// Open has checked every link before the first entry is read.
func (s *Source) Branches() uint64 { return s.graph.Branches() }

// Size is the file's length in bytes, as read by Open.
func (s *Source) Size() int64 { return s.size }

// BytesRead is how many bytes Next has consumed so far; it equals Size once
// Next has returned io.EOF.
func (s *Source) BytesRead() int64 {
	if s.lr == nil {
		return s.readAtClose
	}
	return s.lr.Offset()
}

// SHA256 is the digest of the whole file as Open read it. Once Next has
// returned io.EOF, the entries are known to come from exactly these bytes.
func (s *Source) SHA256() [32]byte { return s.digest }

// Prefix is the PrefixHash of the whole file as Open read it: what a later
// OpenAppend of the file, grown, continues from.
func (s *Source) Prefix() normalize.PrefixHash { return s.prefix }

// FileInfo is the file's status (fstat) when it was opened; it was checked
// unchanged after pass 1, and is what a source fingerprint's fileIdentity
// is taken from (durable.StatOf).
func (s *Source) FileInfo() os.FileInfo { return s.info }

// Close closes the file.
func (s *Source) Close() error {
	if s.lr != nil {
		s.readAtClose = s.lr.Offset()
		s.lr.Release()
		s.lr = nil
	}
	if s.err == nil {
		s.err = os.ErrClosed
	}
	return s.f.Close()
}

// Next returns the next entry, in file order, or io.EOF after the last. Any
// other error is a *readers.RefusedError (class io when the file changed
// since Open, or the reference's refusal of the entry after a light pass
// 1) and is final. Whether the file stayed the bytes Open checked
// is known only at the end: entries are trustworthy once Next has returned
// io.EOF, and a caller that gets an error instead discards what it built.
func (s *Source) Next() (readers.Entry, error) {
	e, _, err := s.NextAppend(nil)
	return e, err
}

// NextAppend is Next with the payload appended to buf (readers.Appender);
// a nil buf gives the entry a payload of its own, as Next does.
func (s *Source) NextAppend(buf []byte) (readers.Entry, []byte, error) {
	if s.err != nil {
		return readers.Entry{}, buf, s.err
	}
	e, buf, err := s.next(buf)
	if err != nil {
		s.err = err
	}
	return e, buf, err
}

// ownPayloadBytes: a line at least this long that does not fit in what is
// left of the caller's buffer gets a payload of its own, allocated once at
// about its size, rather than growing the buffer by doubling copies (a
// 50 MB tool output would briefly hold three times that).
const ownPayloadBytes = 64 << 10

// appendPayload appends e's canonical payload (about lineLen bytes) to
// buf and returns it, capped, with the buffer that holds it; with a nil
// buf, or a long line that does not fit, the payload is a slice of its own
// and buf is returned as it was.
func appendPayload(e *payload.Entry, buf []byte, lineLen int) (p, grown []byte) {
	if buf == nil || lineLen >= ownPayloadBytes && lineLen+64 > cap(buf)-len(buf) {
		return e.Canonical(), buf
	}
	grown = e.AppendCanonical(buf)
	return grown[len(buf):len(grown):len(grown)], grown
}

func (s *Source) next(buf []byte) (readers.Entry, []byte, error) {
	for {
		line, _, err := s.lr.Next()
		if err == io.EOF {
			if !s.graph.Done() || s.lr.Offset() != s.size {
				return readers.Entry{}, buf, s.changed(s.lr.Line())
			}
			if err := s.unchanged(); err != nil {
				return readers.Entry{}, buf, err
			}
			s.graph.Release()
			return readers.Entry{}, buf, io.EOF
		}
		n := s.lr.Line()
		if err != nil {
			return readers.Entry{}, buf, s.changed(n)
		}
		if n == 1 || rustTrimEmpty(line) {
			continue
		}
		e, err := s.dec.Decode(line)
		if err != nil {
			if !s.light {
				return readers.Entry{}, buf, s.changed(n)
			}
			if err := s.unchanged(); err != nil {
				return readers.Entry{}, buf, err
			}
			return readers.Entry{}, buf, s.entryRefusal(n, line, err)
		}
		id, synthesized, err := s.graph.Resolve(n, e)
		if err != nil {
			return readers.Entry{}, buf, err
		}
		var p []byte
		p, buf = appendPayload(e, buf, len(line))
		return readers.Entry{
			ID:            id,
			ParentID:      e.ParentID,
			Type:          e.Type,
			Timestamp:     e.Timestamp,
			Payload:       p,
			Position:      n,
			SynthesizedID: synthesized,
			Role:          e.Role,
			Name:          e.Name,
		}, buf, nil
	}
}

// scan is pass 1.
func (s *Source) scan(opt Options) error {
	lr := s.lr
	line, start, err := lr.Next()
	if err == io.EOF {
		return s.refuse(0, readers.ClassEmptyFile, "Empty JSONL session file: it has no header line", nil)
	}
	if err := s.lineProblem(lr, line, start, err); err != nil {
		return err
	}
	if err := s.readHeader(line, opt); err != nil {
		return err
	}
	for {
		line, start, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err := s.lineProblem(lr, line, start, err); err != nil {
			return err
		}
		if rustTrimEmpty(line) {
			continue
		}
		if opt.Light {
			if l, ok := scanLinkIDs(line); ok {
				// The line's bytes, not copied: AddLinks keeps none.
				s.graph.AddLinks(lr.Line(), start, bytesString(l.id), l.hasID, bytesString(l.parent), l.hasParent)
				continue
			}
		}
		e, err := s.dec.Decode(line)
		if err != nil {
			return s.entryRefusal(lr.Line(), line, err)
		}
		s.graph.Add(lr.Line(), start, e)
	}
	s.size, s.digest, s.prefix = lr.Offset(), lr.Digest(), lr.Prefix()
	if err := s.unchanged(); err != nil {
		return err
	}
	return s.graph.Finish(s.fetch)
}

// lineProblem refuses a line the reference cannot read as text: over the
// length limit, or not UTF-8.
func (s *Source) lineProblem(lr *normalize.LineReader, line []byte, start int64, err error) error {
	switch {
	case errors.Is(err, normalize.ErrLineTooLong):
		return s.refuse(lr.Line(), readers.ClassLineTooLong, fmt.Sprintf(
			"JSONL line exceeds %d bytes (the line starts at byte offset %d)", MaxLineBytes, start), nil)
	case err != nil:
		return s.refuse(lr.Line(), readers.ClassIO, "read: "+err.Error(), err)
	}
	valid, invalidLen, ok := normalize.UTF8Error(line)
	if ok {
		return nil
	}
	msg := normalize.UTF8Message(valid, invalidLen)
	where := fmt.Sprintf("byte %d of the line, byte offset %d in the file", valid, start+int64(valid))
	if invalidLen == 0 && !hasNewline(line) {
		return s.refuse(lr.Line(), readers.ClassTornLine, fmt.Sprintf(
			"the last line has no newline and ends inside a UTF-8 sequence (%s): a torn write; %s", where, msg), nil)
	}
	return s.refuse(lr.Line(), readers.ClassInvalidUTF8, fmt.Sprintf("line is not valid UTF-8 at %s: %s", where, msg), nil)
}

// readHeader reads line 1 as the reference does: Rust's trim(), then
// serde_json into SessionHeader, then SessionHeader::validate.
func (s *Source) readHeader(line []byte, opt Options) error {
	if rustTrimEmpty(line) {
		return s.refuse(1, readers.ClassBadHeader,
			"line 1 is blank; the header must be the first line (the reference: Empty JSONL session file)", nil)
	}
	text := normalize.RustTrim(line)
	h, err := normalize.ParseHeader(text)
	if err != nil {
		var he *normalize.HeaderError
		errors.As(err, &he)
		reason := "Invalid header in JSONL: " + err.Error()
		class := readers.ClassBadHeader
		switch {
		case startsWithBOM(line):
			reason = "line 1 starts with a UTF-8 byte-order mark, which the reference does not skip: " + reason
		case he != nil && he.Syntax != nil && he.Syntax.IsEOF() && !hasNewline(line):
			class = readers.ClassTornLine
			reason = "the header is the only line, has no newline and ends inside its JSON: a torn write; " + reason
		}
		return s.refuse(1, class, reason, err)
	}
	if p := normalize.CheckHeader(h, opt.AllowLegacy); p != nil {
		reason := "Invalid session header in JSONL: " + p.Reason
		if p.Legacy {
			reason += "; `pisess upgrade` can convert it to version 3 first"
		}
		return s.refuse(1, p.Class, reason, nil)
	}
	raw := line
	if hasNewline(raw) {
		raw = raw[:len(raw)-1]
	}
	s.header = h.Readers(readers.FormatJSONLv3, raw)
	return nil
}

// entryRefusal turns payload's refusal into a RefusedError; a last line
// without newline that fails because its JSON ends early is a torn line.
func (s *Source) entryRefusal(n int64, line []byte, err error) error {
	class, detail := readers.ClassBadEntry, err.Error()
	var pe *payload.Error
	if errors.As(err, &pe) {
		class, detail = pe.Class, pe.Detail
	}
	reason := "Bad JSONL entry: " + detail
	if !hasNewline(line) {
		var se *wire.SyntaxError
		if _, perr := wire.ParseJSON(line, nil); errors.As(perr, &se) && se.IsEOF() && se.Error() == detail {
			class = readers.ClassTornLine
			reason = "the last line has no newline and ends inside its JSON: a torn write; " + reason
		}
	}
	return s.refuse(n, class, reason, err)
}

// fetch reads the entry starting at byte offset loc again (for legacy id
// synthesis, which needs every explicit id of the file first).
func (s *Source) fetch(loc int64) (*payload.Entry, error) {
	lr := normalize.NewLineReader(io.NewSectionReader(s.f, loc, math.MaxInt64), 4096, MaxLineBytes, false)
	line, _, err := lr.Next()
	if err != nil {
		return nil, s.changed(0)
	}
	e, err := s.fdec.Decode(line)
	if err != nil {
		return nil, s.changed(0)
	}
	return e, nil
}

// unchanged checks, after pass 1, that the file is still the one opened.
func (s *Source) unchanged() error {
	now, err := s.f.Stat()
	if err != nil {
		return s.refuse(0, readers.ClassIO, "stat: "+err.Error(), err)
	}
	if now.Size() != s.size || !sameIdentity(s.info, now) {
		return s.changed(0)
	}
	return nil
}

func (s *Source) changed(line int64) error {
	return &readers.SourceChangedError{Path: s.path, Line: line, Detail: "its size or identity moved between the reads"}
}

func (s *Source) refuse(line int64, class readers.Class, reason string, err error) error {
	return &readers.RefusedError{Path: s.path, Line: line, Class: class, Reason: reason, Err: err}
}

// openRegular opens path for reading without following a symlink in its
// last component and refuses anything but a regular file. O_NONBLOCK keeps
// a FIFO from blocking the open; it does nothing to a regular file.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, &readers.RefusedError{Path: path, Class: readers.ClassSymlink,
				Reason: "the session file is a symlink; pi would lock and migrate its target, pisess follows no symlink", Err: err}
		}
		return nil, nil, &readers.RefusedError{Path: path, Class: readers.ClassIO, Reason: "open: " + err.Error(), Err: err}
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, &readers.RefusedError{Path: path, Class: readers.ClassIO, Reason: "stat: " + err.Error(), Err: err}
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, &readers.RefusedError{Path: path, Class: readers.ClassSpecialFile,
			Reason: fmt.Sprintf("not a regular file (%s)", info.Mode().Type())}
	}
	return f, info, nil
}

// sameIdentity compares what a source fingerprint's fileIdentity holds
// (device, inode, change time) and the modification time.
func sameIdentity(a, b os.FileInfo) bool {
	sa, oka := durable.StatOf(a)
	sb, okb := durable.StatOf(b)
	if !oka || !okb {
		return a.ModTime().Equal(b.ModTime())
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino && sa.Ctime == sb.Ctime && sa.Mtime == sb.Mtime
}
