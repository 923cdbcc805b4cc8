package writers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"pisess/readers"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// StageOptions configure Stage.
type StageOptions struct {
	// MaxSegmentBytes is the segment rollover size; 0 means 64 MiB, the
	// most pi reads (more is refused by store.Create).
	MaxSegmentBytes int64
	// Clock stamps frames, the manifest and checkpoints; nil means the wall
	// clock. Fix it to reproduce a store byte for byte.
	Clock func() time.Time
	// Ops performs every file operation; the zero value is durable.OS.
	Ops durable.Ops
	// Progress, when set, is called after each entry with the number of
	// bytes its frame line (newline included) added to the store.
	Progress func(bytes int64)
	// Events are appended to migrations/ledger.jsonl, in order, after the
	// manifest (the reference's migration writes its one completed event
	// into the staging store before installing it). None: no ledger file.
	Events []wire.MigrationEvent
	// SourceState, when set, is written as source-state.json after the
	// events. Nil: no source-state.json.
	SourceState *wire.SourceState
	// Verified says the caller checks the store read back before anything
	// uses it (verify.VerifiedStaged does): the writer may then take a
	// readers.Linked source's word for its links and not hold every id
	// again (a million cost ~22 MB). Without it the writer checks them.
	Verified bool
	// SourcePath names the session in the refusals Stage returns (see
	// Stage); "" leaves them without a path.
	SourcePath string
	// PrefixEntries, when not 0, asks Stage for the hash chain after that
	// many entries (StageResult.PrefixChain): a store of the same session
	// with that many entries and that chain is this one's prefix, which
	// the source reproduces (a refreshed SQLite session's displaced
	// sidecar, whose database never keeps its first bytes as a JSONL
	// file does).
	PrefixEntries uint64
}

// StageResult describes the store Stage wrote.
type StageResult struct {
	// Manifest is the manifest as written.
	Manifest wire.Manifest
	// Entries is the number of frames, Bytes the sum of their line lengths.
	Entries uint64
	Bytes   uint64
	// ChainHash is the hash chain after the last frame (the genesis value
	// for an empty store).
	ChainHash string
	// Entries' ids, parents and types, in order, as the source gave them:
	// with ChainHash, what verification compares the frames read back
	// against, instead of reading the source again.
	EntryDigest [32]byte
	// IndexSHA256 and ManifestSHA256 are the hex digests of the index and
	// the manifest as written (for the refresh record).
	IndexSHA256, ManifestSHA256 string
	// IndexSHA256State is the index digest's state (store.Writer's
	// IndexSHA256State), from which a refresh in place goes on.
	IndexSHA256State []byte
	// PrefixChain is the hash chain after StageOptions.PrefixEntries
	// entries ("" when it was not asked for, or the store has fewer).
	PrefixChain string
}

// Stage creates a store in dir (which must not exist, or be an empty
// directory) and fills it from src: every entry in source order with its
// id, parent, type and payload bytes exactly as src gives them, then the
// manifest (sessionId the header's ID, sourceFormat the header's Format),
// then opt.Events and opt.SourceState when given, and finally seals it
// (every file and directory fsynced) — unless opt.Ops.DeferSync, when the
// caller seals it with opt.Ops.SealTree once it has written the rest. It
// does not close src.
//
// Stage never installs anything and never removes anything: on error, dir
// may hold a partial store, which the caller owns and must quarantine or
// remove (it is a staging directory, invisible to pi by its name). A
// cancelled ctx stops it between two entries with ctx's error.
//
// Two failures are the reference's refusals of the session, whatever the
// machine, and come back as a *readers.RefusedError in the chain (besides
// the source's own): an entry whose frame is over the reference's segment
// size (wire.MaxSegmentBytes; a smaller opt.MaxSegmentBytes is the
// caller's choice, and its failure a plain error), and a staging directory
// whose name is too long for the file system (ENAMETOOLONG: the reference
// names its staging directory the same way).
func Stage(ctx context.Context, src readers.Source, dir string, opt StageOptions) (res StageResult, err error) {
	h := src.Header()
	so := store.Options{MaxSegmentBytes: opt.MaxSegmentBytes, Clock: opt.Clock, Ops: opt.Ops}
	if l, ok := src.(readers.Linked); ok && opt.Verified {
		so.Branches = l.Branches
	}
	w, err := store.Create(dir, so)
	if err != nil {
		if errors.Is(err, syscall.ENAMETOOLONG) {
			name := filepath.Base(dir)
			sidecar, _, _ := strings.Cut(name, ".staging.")
			err = readers.NameTooLong(opt.SourcePath, sidecar, len(name), err)
		}
		return StageResult{}, fmt.Errorf("stage %s: %w", dir, err)
	}
	defer func() {
		// After Seal, Close only releases descriptors; before it, the
		// store is partial anyway and the first error is the one to report.
		if cerr := w.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("stage %s: %w", dir, cerr)
		}
	}()
	var digest wire.EntryDigest
	var n uint64
	prefixChain := ""
	batches, stop := readAhead(ctx, src)
	defer stop()
	for b := range batches {
		for _, e := range b.entries {
			digest.Add(e.ID, e.ParentID, e.Type)
			row, err := w.Append(e.ID, e.ParentID, e.Type, e.Payload)
			if err != nil {
				return StageResult{}, fmt.Errorf("stage %s: entry %d (%s): %w", dir, e.Position, e.ID, frameRefusal(err, e, opt.SourcePath))
			}
			if opt.Progress != nil {
				opt.Progress(int64(row.ByteLength))
			}
			if n++; n == opt.PrefixEntries {
				prefixChain = w.ChainHash()
			}
		}
		b.release() // Append copied every payload into its frame
		if errors.Is(b.err, io.EOF) {
			break
		}
		if err := ctx.Err(); err != nil {
			return StageResult{}, fmt.Errorf("stage %s: %w", dir, err)
		}
		if b.err != nil {
			return StageResult{}, fmt.Errorf("stage %s: read source: %w", dir, b.err)
		}
	}
	stop()
	st, err := finish(w, h, opt)
	if err != nil {
		return StageResult{}, fmt.Errorf("stage %s: %w", dir, err)
	}
	st.EntryDigest, st.PrefixChain = digest.Sum(), prefixChain
	return st, nil
}

// frameRefusal returns err, an Append's, as the reference's refusal of the
// session when it is a frame over the reference's segment size (see Stage),
// else err itself.
func frameRefusal(err error, e readers.Entry, sourcePath string) error {
	var big *store.FrameTooLargeError
	if !errors.As(err, &big) || big.Bytes <= wire.MaxSegmentBytes {
		return err
	}
	size := fmt.Sprintf("%d bytes", big.Bytes)
	if big.AtLeast {
		size = "more than " + size
	}
	return readers.FrameTooLarge(sourcePath, e.Position, e.ID, size, wire.MaxSegmentBytes, err)
}

// finish writes the manifest, the events and the source state, and seals.
func finish(w *store.Writer, h readers.Header, opt StageOptions) (StageResult, error) {
	m, err := w.WriteManifest(h.ID, string(h.Format))
	if err != nil {
		return StageResult{}, err
	}
	for _, ev := range opt.Events {
		if err := w.AppendLedger(ev); err != nil {
			return StageResult{}, err
		}
	}
	if opt.SourceState != nil {
		if err := w.WriteSourceState(*opt.SourceState); err != nil {
			return StageResult{}, err
		}
	}
	if opt.Ops.DeferSync {
		// The caller writes more into the store (after verification) and
		// seals it once with Ops.SealTree: flush to the kernel only.
		if err := w.Close(); err != nil {
			return StageResult{}, err
		}
	} else if err := w.Seal(); err != nil {
		return StageResult{}, err
	}
	return StageResult{
		Manifest:    m,
		Entries:     m.Counters.EntriesTotal,
		Bytes:       m.Counters.BytesTotal,
		ChainHash:   m.Integrity.ChainHash,
		IndexSHA256: w.IndexSHA256(), ManifestSHA256: w.ManifestSHA256(), IndexSHA256State: w.IndexSHA256State(),
	}, nil
}
