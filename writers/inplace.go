package writers

import (
	"context"
	"errors"
	"fmt"
	"io"

	"pisess/readers"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// MaxInPlaceBytes bounds the payloads AppendInPlace holds before it writes
// the first of them (each is read and accepted before the store changes):
// a session that gained more than that is rebuilt from its whole source
// (Stage), which streams. A run's pipeline holds at most two such sessions
// per job (one read and checked while the one before it is written).
const MaxInPlaceBytes = 16 << 20

// ErrTooMuchAppended is matched by AppendInPlace's error when the source
// gained more payload bytes than it holds (InPlaceOptions.MaxHeldBytes):
// nothing was written.
var ErrTooMuchAppended = errors.New("too much appended to continue the store in place")

// InPlaceOptions configure AppendInPlace.
type InPlaceOptions struct {
	// MaxSegmentBytes, Clock and Ops are StageOptions'.
	StageOptions
	// MaxHeldBytes bounds the appended payloads held before the first is
	// written; 0 means MaxInPlaceBytes.
	MaxHeldBytes int
	// Vouched, when set, says whether the caller vouches for the store's
	// frames and names (store.Options.FramesVouched and Names). It is
	// asked while the source's prefix is read (both are system calls on
	// the path of every refresh: issue 14).
	Vouched func() (names []string, frames bool)
	// IndexSHA256State, needed when Vouched vouches for the frames, is the
	// index digest's state the caller recorded when it wrote the store
	// (store.Options.IndexSHA256State): the base rows are not hashed.
	IndexSHA256State []byte
	// Prepare is called with the store as checked and the number of
	// entries to append, once every one has been read and accepted, just before the first byte is
	// written into it: the caller compares the store with what it vouches
	// for and marks the sidecar dirty (FORMAT.md §8). Its error stops
	// AppendInPlace.
	Prepare func(b store.Base, appended int) error
	// Written, when set, is called once the appended entries are handed
	// to the store (their payloads no longer held), before the manifest is
	// written: a caller bounding how many stores are written at once can
	// let the next one begin (the manifest's replacement waits on the disk
	// for the old one's blocks to be freed).
	Written func()
}

// AppendInPlace is Stage for a source that only grew since the store at
// dir was staged from it: it continues that store where it lies
// (store.ContinueInPlace: the store is checked, its frames CRC-checked or
// vouched for, while the source's unchanged prefix is hashed), reads every
// entry the source gained and checks that the store would accept each,
// calls opt.Prepare, and only then appends them and writes the manifest
// (flushed, not synced: the caller seals). With the same clock, the store
// is byte for byte the one Stage writes from the whole source.
//
// An appended entry that continues a store entry before the last (pi's
// branching from an earlier point of the session) needs the store's links,
// which only its frames hold: the store is then checked again with every
// frame read (store.Options.BaseLinks) and the source opened again, before
// anything is written.
//
// The source's header must name the store's session and format. An error
// matching store.ErrNotResumable or ErrTooMuchAppended, or any error
// before Prepare, leaves dir as it was. An error after Prepare leaves a
// store the caller must not install: the sidecar stays dirty for a
// rebuild.
func AppendInPlace(ctx context.Context, dir string, open OpenAppended, opt InPlaceOptions) (AppendResult, error) {
	res, err := appendInPlace(ctx, dir, open, opt, false)
	if errors.Is(err, store.ErrBaseLinksNeeded) {
		// Refused by readAppended: nothing was written, Prepare not
		// called.
		res, err = appendInPlace(ctx, dir, open, opt, true)
	}
	return res, err
}

func appendInPlace(ctx context.Context, dir string, open OpenAppended, opt InPlaceOptions, links bool) (res AppendResult, err error) {
	w, b, src, err := continueBase(open, func() (*store.Writer, store.Base, error) {
		so := store.Options{MaxSegmentBytes: opt.MaxSegmentBytes, Clock: opt.Clock, Ops: opt.Ops, BaseLinks: links}
		if opt.Vouched != nil && !links {
			so.Names, so.FramesVouched = opt.Vouched()
			if so.FramesVouched {
				so.IndexSHA256State = opt.IndexSHA256State
			}
		}
		return store.ContinueInPlace(ctx, dir, so)
	})
	if err != nil {
		return AppendResult{}, fmt.Errorf("append in place %s: %w", dir, err)
	}
	defer src.Close()
	defer func() {
		if cerr := w.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("append in place %s: %w", dir, cerr)
		}
	}()
	h := src.Header()
	res.Base = b
	max := opt.MaxHeldBytes
	if max <= 0 {
		max = MaxInPlaceBytes
	}
	entries, err := readAppended(ctx, src, w, max, opt.SourcePath)
	if err != nil {
		return AppendResult{}, fmt.Errorf("append in place %s: %w", dir, err)
	}
	if opt.Prepare != nil {
		if err := opt.Prepare(b, len(entries)); err != nil {
			return AppendResult{}, fmt.Errorf("append in place %s: %w", dir, err)
		}
	}
	for _, e := range entries {
		row, err := w.Append(e.ID, e.ParentID, e.Type, e.Payload)
		if err != nil {
			return AppendResult{}, fmt.Errorf("append in place %s: entry %d (%s): %w", dir, e.Position, e.ID, frameRefusal(err, e, opt.SourcePath))
		}
		res.Appended = append(res.Appended, AppendedEntry{ID: e.ID, ParentID: e.ParentID, Type: e.Type, PayloadSHA256: wire.PayloadSHA256(e.Payload)})
		if opt.Progress != nil {
			opt.Progress(int64(row.ByteLength))
		}
	}
	entries = nil
	if opt.Written != nil {
		opt.Written()
	}
	so := opt.StageOptions
	so.Ops.DeferSync = true // flushed only: the caller seals
	st, err := finish(w, h, so)
	if err != nil {
		return AppendResult{}, fmt.Errorf("append in place %s: %w", dir, err)
	}
	res.StageResult = st
	return res, nil
}

// readAppended reads every entry src has left, each checked as w's Append
// would check it, holding at most max bytes of payloads.
func readAppended(ctx context.Context, src readers.Source, w *store.Writer, max int, sourcePath string) ([]readers.Entry, error) {
	var out []readers.Entry
	var held int
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e, err := src.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read source: %w", err)
		}
		if err := w.Appendable(e.ID, e.ParentID, e.Type, e.Payload); err != nil {
			return nil, fmt.Errorf("entry %d (%s): %w", e.Position, e.ID, frameRefusal(err, e, sourcePath))
		}
		if held += len(e.Payload); held > max {
			return nil, ErrTooMuchAppended
		}
		out = append(out, e)
	}
}

// OpenAppended opens the entries that follow a base store's: known reports
// whether an id is already in the store being built (base's entries and
// those appended so far), for the reader's duplicate and parent checks.
type OpenAppended func(known func(id string) bool) (readers.Source, error)

// AppendedEntry is what an appended entry must look like when read back.
type AppendedEntry struct {
	ID, ParentID, Type string
	PayloadSHA256      string
}

// AppendResult describes the store AppendInPlace continued.
type AppendResult struct {
	StageResult
	// Base is the store continued, as its check read it.
	Base store.Base
	// Appended lists the entries written after base's, in order.
	Appended []AppendedEntry
}

// continueBase opens the source of the appended entries on a goroutine of
// its own (its unchanged prefix hashed, one sequential read) while base
// checks the store it continues and returns its Writer: the two are
// independent until the first appended entry asks what the Writer holds,
// so on two cores the refresh of a large session takes the longer of the
// two, not their sum. The source must be the base's session; on error
// nothing is left open.
func continueBase(open OpenAppended, base func() (*store.Writer, store.Base, error)) (*store.Writer, store.Base, readers.Source, error) {
	type opened struct {
		src readers.Source
		err error
	}
	var w *store.Writer
	ch := make(chan opened, 1)
	go func() {
		src, err := open(func(id string) bool { return w.Has(id) })
		ch <- opened{src, err}
	}()
	w, b, err := base()
	o := <-ch
	if err == nil {
		err = o.err
	}
	if err == nil {
		err = sameSession(o.src.Header(), b)
	}
	if err != nil {
		if o.src != nil {
			o.src.Close()
		}
		if w != nil {
			_ = w.Close()
		}
		return nil, store.Base{}, nil, err
	}
	return w, b, o.src, nil
}

// sameSession refuses a source whose header is not base's session and
// format (store.ErrNotResumable).
func sameSession(h readers.Header, b store.Base) error {
	if h.ID != b.Manifest.SessionID || wire.SourceFormat(h.Format) != b.Manifest.SourceFormat {
		return fmt.Errorf("the source is session %s (%s), the base store %s (%s): %w",
			h.ID, h.Format, b.Manifest.SessionID, b.Manifest.SourceFormat, store.ErrNotResumable)
	}
	return nil
}
