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

// OpenAppended opens the entries that follow a base store's: known reports
// whether an id is already in the store being built (base's entries and
// those appended so far), for the reader's duplicate and parent checks.
type OpenAppended func(known func(id string) bool) (readers.Source, error)

// AppendedEntry is what an appended entry must look like when read back.
type AppendedEntry struct {
	ID, ParentID, Type string
	PayloadSHA256      string
}

// AppendResult describes the store StageAppend wrote.
type AppendResult struct {
	StageResult
	// Base is the store continued, as its copy read it.
	Base store.Base
	// Appended lists the entries written after base's, in order.
	Appended []AppendedEntry
}

// StageAppend is Stage for a source that only grew since base was staged
// from it: it copies base into dir (store.Resume: each frame CRC-checked
// against its row while copied), then appends the entries of the source
// open returns, writes the manifest, opt.Events and opt.SourceState, and
// seals the store. With the same clock, the result is byte for byte the
// store Stage writes from the whole source, in time proportional to the
// appended entries plus one copy of base.
//
// The source's header must name base's session and format. An error
// matching store.ErrNotResumable means base cannot be continued; any
// error leaves dir to the caller, as Stage does.
//
// With opt.BaseVouched the base's frames are only CRC-checked while they
// are copied; when an appended entry then turns out to continue a base
// entry before the last (pi's branching from an earlier point of the
// session), the store is staged again, with every base frame read.
func StageAppend(ctx context.Context, base string, open OpenAppended, dir string, opt StageOptions) (AppendResult, error) {
	res, err := stageAppend(ctx, base, open, dir, opt)
	if opt.BaseVouched && errors.Is(err, store.ErrBaseLinksNeeded) {
		// dir is this call's own partial store: start it over.
		if rerr := opt.Ops.RemoveAll(dir); rerr != nil {
			return AppendResult{}, fmt.Errorf("stage %s: %w (and %v)", dir, err, rerr)
		}
		opt.BaseVouched = false
		return stageAppend(ctx, base, open, dir, opt)
	}
	return res, err
}

func stageAppend(ctx context.Context, base string, open OpenAppended, dir string, opt StageOptions) (res AppendResult, err error) {
	w, b, src, err := continueBase(open, func() (*store.Writer, store.Base, error) {
		return store.Resume(ctx, base, dir, store.Options{MaxSegmentBytes: opt.MaxSegmentBytes, Clock: opt.Clock, Ops: opt.Ops, BaseVouched: opt.BaseVouched})
	})
	if err != nil {
		return AppendResult{}, fmt.Errorf("stage %s: %w", dir, err)
	}
	defer src.Close()
	defer func() {
		if cerr := w.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("stage %s: %w", dir, cerr)
		}
	}()
	h := src.Header()
	res.Base = b
	for {
		if err := ctx.Err(); err != nil {
			return AppendResult{}, fmt.Errorf("stage %s: %w", dir, err)
		}
		e, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return AppendResult{}, fmt.Errorf("stage %s: read source: %w", dir, err)
		}
		row, err := w.Append(e.ID, e.ParentID, e.Type, e.Payload)
		if err != nil {
			return AppendResult{}, fmt.Errorf("stage %s: entry %d (%s): %w", dir, e.Position, e.ID, frameRefusal(err, e, opt.SourcePath))
		}
		res.Appended = append(res.Appended, AppendedEntry{ID: e.ID, ParentID: e.ParentID, Type: e.Type, PayloadSHA256: wire.PayloadSHA256(e.Payload)})
		if opt.Progress != nil {
			opt.Progress(int64(row.ByteLength))
		}
	}
	st, err := finish(w, h, opt)
	if err != nil {
		return AppendResult{}, fmt.Errorf("stage %s: %w", dir, err)
	}
	res.StageResult = st
	return res, nil
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
