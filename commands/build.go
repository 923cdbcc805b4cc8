package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/readers/discover"
	"pisess/writers"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

func buildCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "build",
		Usage:     "write a V2 store of one session into a new directory (plumbing)",
		ArgsUsage: "SESSION OUTDIR",
		Description: `Reads the session SESSION (JSONL or SQLite) as the reference's migration reads
it and writes a V2 store of it into OUTDIR, which must not exist (with --force,
an OUTDIR that is an empty directory or a V2 store is replaced). The store is
built in a sibling staging directory and renamed into place once sealed.

This is plumbing for demos and tests, not the migration: it writes no ledger
event and no source-state.json, takes no lock and installs no sidecar (see
pisess migrate). With PISESS_CLOCK set, the store is byte-identical to the
reference implementation's:
   PISESS_CLOCK=2026-01-01T00:00:00.000Z pisess build session.jsonl /tmp/session.v2
   pisess inspect /tmp/session.v2`,
		Flags: []cli.Flag{
			jsonFlag(),
			&cli.Int64Flag{Name: "max-segment-bytes", Value: 64 << 20, Usage: "segment rollover size in bytes, at most 64 MiB (the most pi reads)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing OUTDIR that is an empty directory or a V2 store"},
		},
		Action: func(c *cli.Context) error {
			a, err := args(c, "SESSION", "OUTDIR")
			if err != nil {
				return err
			}
			clock, err := ClockFromEnv()
			if err != nil {
				return err
			}
			max := c.Int64("max-segment-bytes")
			if max <= 0 {
				return engine.Usagef("--max-segment-bytes %d: want a positive size", max)
			}
			bar := NewBytesProgress(r.stderr, -1, "building")
			rep, err := runBuild(r.log.WithContext(c.Context), buildOptions{
				Session:         a[0],
				OutDir:          a[1],
				MaxSegmentBytes: max,
				Force:           c.Bool("force"),
				Clock:           clock,
				Progress:        func(n int64) { bar.Add(int(n)) },
			})
			bar.Finish()
			if err != nil {
				return err
			}
			r.report, r.value = rep, rep
			r.text = func(w io.Writer) { renderBuild(w, rep) }
			return nil
		},
	}, exitStatusHelp(
		"0   the store was built",
		"8   the session cannot be read or the reference's model refuses it, or writing failed",
		"16  usage error (OUTDIR exists, bad flag, invalid PISESS_CLOCK)",
	))
}

// buildOptions configure runBuild.
type buildOptions struct {
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

// buildReport describes the store runBuild wrote.
type buildReport struct {
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
func (buildReport) Tally() engine.Tally { return engine.Tally{} }

// runBuild reads one session and writes a V2 store of it into opt.OutDir,
// the way the reference's migration fills its staging store, but without a
// ledger event, source state, lock or installation beside the session: it
// is plumbing for demos and tests, not the migration. The store is built
// in a sibling staging directory and renamed into place only once sealed
// (writers.BuildOutDir), so OutDir never holds a partial store; on failure
// the staging directory is removed. A session the reference's model
// refuses is an error holding a *readers.RefusedError (readers.AsRefused).
func runBuild(ctx context.Context, opt buildOptions) (buildReport, error) {
	log := zerolog.Ctx(ctx)
	if opt.MaxSegmentBytes < 0 || opt.MaxSegmentBytes > wire.MaxSegmentBytes {
		return buildReport{}, engine.Usagef("--max-segment-bytes %d: want 1 to %d (64 MiB, the most pi reads)", opt.MaxSegmentBytes, wire.MaxSegmentBytes)
	}
	out := filepath.Clean(opt.OutDir)
	replace, err := writers.CheckOutDir(out, opt.Force)
	var od *writers.OutDirError
	switch {
	case errors.As(err, &od) && od.Exists:
		return buildReport{}, engine.Usagef("%v (--force replaces an empty directory or a V2 store)", od)
	case errors.As(err, &od):
		return buildReport{}, engine.Usagef("%v: --force replaces only an empty directory or a V2 store", od)
	case err != nil:
		return buildReport{}, fmt.Errorf("build: %w", err)
	}
	src, err := discover.OpenSource(opt.Session)
	if err != nil {
		return buildReport{}, fmt.Errorf("build: %w", err)
	}
	defer src.Close()

	res, err := writers.BuildOutDir(ctx, *log, opt.Session, src, out, replace, writers.StageOptions{
		MaxSegmentBytes: opt.MaxSegmentBytes,
		Clock:           opt.Clock,
		Ops:             durable.OS,
		Progress:        opt.Progress,
	})
	if err != nil {
		return buildReport{}, fmt.Errorf("build: %w", err)
	}
	h := src.Header()
	log.Debug().Str("store", out).Uint64("entries", res.Entries).Msg("store built")
	return buildReport{
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

func renderBuild(w io.Writer, rep buildReport) {
	verb := "built"
	if rep.Replaced {
		verb = "rebuilt"
	}
	fmt.Fprintf(w, "%s %s from %s\n", verb, rep.Store, rep.Session)
	fmt.Fprintf(w, "  session %s (%s)\n", rep.SessionID, rep.SourceFormat)
	fmt.Fprintf(w, "  %d entries, %d bytes in %d segment(s)\n", rep.Entries, rep.Bytes, rep.Segments)
	fmt.Fprintf(w, "  chain %s\n", rep.ChainHash)
}
