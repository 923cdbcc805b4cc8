package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/writers/store"
)

func inspectCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "inspect",
		Usage:     "show a V2 store's manifest, counts and problems (read-only)",
		ArgsUsage: "STORE",
		Description: `Reads the V2 store STORE (a <stem>.v2 directory) without writing or locking
anything, and prints its manifest, its counts measured from the files
(entries, messages, branches, compactions, bytes, segments, checkpoints,
ledger events) and every problem the store checker finds, each with its
class, file, segment offset or line, and detail. It checks the store alone;
pisess verify checks a sidecar against its session.`,
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			a, err := args(c, "STORE")
			if err != nil {
				return err
			}
			rep, err := runInspect(r.log.WithContext(c.Context), a[0])
			if err != nil {
				return err
			}
			r.report = rep
			r.value = inspectJSON{inspectReport: rep, Manifest: json.RawMessage(rep.ManifestDocument()), Clean: len(rep.Problems) == 0}
			r.text = func(w io.Writer) { renderInspect(w, rep) }
			return nil
		},
	}, exitStatusHelp(
		"0   the store is clean",
		"4   problems were found (listed)",
		"8   the store cannot be opened",
		"16  usage error",
	))
}

// inspectReport is one store's inspection (store.Inspect).
type inspectReport struct {
	store.Inspection
}

// Tally counts every problem as left: inspect repairs nothing.
func (r inspectReport) Tally() engine.Tally { return engine.Tally{Problems: len(r.Problems)} }

// runInspect reads the store at dir without writing or locking anything
// (store.Inspect). An error means the store could not be opened at all
// (dir missing, not a directory, reached through a symlink); everything
// else is a problem in the report.
func runInspect(ctx context.Context, dir string) (inspectReport, error) {
	in, err := store.Inspect(ctx, dir)
	if err != nil {
		return inspectReport{}, err
	}
	if in.ManifestErr != nil {
		zerolog.Ctx(ctx).Debug().Err(in.ManifestErr).Str("store", dir).Msg("no readable manifest")
	}
	return inspectReport{in}, nil
}

// inspectJSON is inspect's --json object: the report with the manifest as
// the document the store holds (null when it has none).
type inspectJSON struct {
	inspectReport
	Manifest json.RawMessage `json:"manifest"`
	Clean    bool            `json:"clean"`
}

func renderInspect(w io.Writer, rep inspectReport) {
	fmt.Fprintf(w, "store %s\n\n", rep.Store)
	if doc := rep.ManifestDocument(); doc != nil {
		fmt.Fprintf(w, "manifest.json:\n%s\n\n", doc)
	} else {
		fmt.Fprintf(w, "manifest.json: none readable\n\n")
	}
	c := rep.Counts
	fmt.Fprintf(w, "counts (measured from the files):\n")
	for _, kv := range []struct {
		k string
		v uint64
	}{
		{"entries", c.Entries}, {"messages", c.Messages}, {"branches", c.Branches},
		{"compactions", c.Compactions}, {"bytes", c.Bytes}, {"segments", c.Segments},
		{"checkpoints", c.Checkpoints}, {"ledger events", c.LedgerEvents},
	} {
		fmt.Fprintf(w, "  %-14s %d\n", kv.k, kv.v)
	}
	if !c.Complete {
		fmt.Fprintf(w, "  (incomplete: reading stopped at damage listed below)\n")
	}
	fmt.Fprintln(w)
	if len(rep.Problems) == 0 {
		fmt.Fprintf(w, "no problems found\n")
		return
	}
	fmt.Fprintf(w, "%d problem(s):\n", len(rep.Problems))
	for _, p := range rep.Problems {
		where := p.File
		switch {
		case p.Segment > 0:
			where += fmt.Sprintf(" (segment %d, offset %d)", p.Segment, p.Offset)
		case p.Line > 0:
			where += fmt.Sprintf(" (line %d)", p.Line)
		}
		fmt.Fprintf(w, "  %s: %s: %s\n", p.Class, where, p.Detail)
	}
}
