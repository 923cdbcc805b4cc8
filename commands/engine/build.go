package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"pisess/readers/discover"
	"pisess/writers"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// BuildOptions configure Build.
type BuildOptions struct {
	// Session is the session file (.jsonl or .sqlite).
	Session string
	// OutDir is where the store goes; it must not exist unless Force.
	OutDir string
	// MaxSegmentBytes is the segment rollover size: 0 means 64 MiB, the
	// most pi reads.
	MaxSegmentBytes int64
	// Force replaces an existing OutDir that is an empty directory or a V2
	// store (anything else is refused: build never deletes what it cannot
	// recognise).
	Force bool
	// Clock stamps what is written; nil means the wall clock.
	Clock func() time.Time
	// Progress, when set, is called after each entry with the bytes its
	// frame added.
	Progress func(bytes int64)
}

// BuildReport describes the store Build wrote.
type BuildReport struct {
	Session      string `json:"session"`
	Store        string `json:"store"`
	SessionID    string `json:"sessionId"`
	SourceFormat string `json:"sourceFormat"`
	Entries      uint64 `json:"entries"`
	Bytes        uint64 `json:"bytes"`
	Segments     uint64 `json:"segments"`
	ChainHash    string `json:"chainHash"`
	// Replaced is true when Force replaced an existing OutDir.
	Replaced bool `json:"replaced"`
}

// Tally: a store that was built has no problems; a session that could not
// be built is an error.
func (BuildReport) Tally() Tally { return Tally{} }

// Build reads one session and writes a V2 store of it into opt.OutDir, the
// way the reference's migration fills its staging store, but without a
// ledger event, source state, lock or installation beside the session: it
// is plumbing for demos and tests, not the migration. The store is built in
// a sibling staging directory and renamed into place only once sealed, so
// OutDir never holds a partial store; on failure the staging directory is
// removed. A session the reference's model refuses is an error holding a
// *readers.RefusedError (see AsRefused).
func Build(ctx context.Context, opt BuildOptions) (BuildReport, error) {
	log := zerolog.Ctx(ctx)
	if opt.MaxSegmentBytes < 0 || opt.MaxSegmentBytes > wire.MaxSegmentBytes {
		return BuildReport{}, Usagef("--max-segment-bytes %d: want 1 to %d (64 MiB, the most pi reads)", opt.MaxSegmentBytes, wire.MaxSegmentBytes)
	}
	out := filepath.Clean(opt.OutDir)
	replace, err := writers.CheckOutDir(out, opt.Force)
	var od *writers.OutDirError
	switch {
	case errors.As(err, &od) && od.Exists:
		return BuildReport{}, Usagef("%v (--force replaces an empty directory or a V2 store)", od)
	case errors.As(err, &od):
		return BuildReport{}, Usagef("%v: --force replaces only an empty directory or a V2 store", od)
	case err != nil:
		return BuildReport{}, fmt.Errorf("build: %w", err)
	}
	src, err := discover.OpenSource(opt.Session)
	if err != nil {
		return BuildReport{}, fmt.Errorf("build: %w", err)
	}
	defer src.Close()

	res, err := writers.BuildOutDir(ctx, *log, opt.Session, src, out, replace, writers.StageOptions{
		MaxSegmentBytes: opt.MaxSegmentBytes,
		Clock:           opt.Clock,
		Ops:             durable.OS,
		Progress:        opt.Progress,
	})
	if err != nil {
		return BuildReport{}, fmt.Errorf("build: %w", err)
	}
	h := src.Header()
	log.Debug().Str("store", out).Uint64("entries", res.Entries).Msg("store built")
	return BuildReport{
		Session:      opt.Session,
		Store:        out,
		SessionID:    h.ID,
		SourceFormat: string(h.Format),
		Entries:      res.Entries,
		Bytes:        res.Bytes,
		Segments:     res.Manifest.Files.SegmentCount,
		ChainHash:    res.ChainHash,
		Replaced:     replace,
	}, nil
}
