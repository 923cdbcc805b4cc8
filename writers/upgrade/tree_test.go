package upgrade

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"pisess/readers"
)

// TestTree: Tree upgrades one tree's sessions in order; its Begin runs
// once, before the first change, and only in a real run with a file to
// upgrade; prepare completes the options of each session that is
// upgraded, and end gets the tree's totals.
func TestTree(t *testing.T) {
	const v3 = `{"type":"session","version":3,"id":"7c1d2e3f-0000-4000-8000-000000000002","timestamp":"2025-06-01T00:00:00.000Z","cwd":"/x"}` + "\n"
	mk := func(t *testing.T) (string, []Session) {
		tree, v1 := sessionTree(t, v1Session)
		cur := writeFile(t, filepath.Join(tree, "--x--", "2025-06-02T00-00-00-000Z_t.jsonl"), v3)
		// A SQLite session is settled by its format: never opened.
		db := filepath.Join(tree, "--x--", "2025-06-03T00-00-00-000Z_u.sqlite")
		return tree, []Session{{v1, readers.FormatJSONLv3}, {cur, readers.FormatJSONLv3}, {db, readers.FormatSQLitev1}}
	}
	type calls struct {
		begin    int
		prepared []int
		end      []Totals
	}
	opts := func(tree string, sessions []Session, c *calls, dry bool) TreeOptions {
		rec := &recorder{}
		return TreeOptions{Options: Options{DryRun: dry}, Log: zerolog.Nop(),
			Begin: func() (func(int, *Options), func(Totals), error) {
				c.begin++
				prepare := func(k int, o *Options) {
					c.prepared = append(c.prepared, k)
					p := options(t, tree, sessions[k].Path, rec)
					o.Tree, o.QuarantinePath, o.Record = p.Tree, p.QuarantinePath, p.Record
				}
				return prepare, func(tot Totals) { c.end = append(c.end, tot) }, nil
			}}
	}
	status := func(res []Result) []Status {
		var out []Status
		for _, r := range res {
			out = append(out, r.Status)
		}
		return out
	}

	t.Run("dry run", func(t *testing.T) {
		tree, sessions := mk(t)
		before := treeDigest(t, tree)
		var c calls
		res, err := Tree(context.Background(), sessions, opts(tree, sessions, &c, true))
		if err != nil || len(res) != 3 || res[0].Status != StatusPlanned || res[1].Status != StatusCurrent || res[2].Status != StatusSkipped {
			t.Fatalf("dry run: %v %v", status(res), err)
		}
		if c.begin != 0 || len(c.end) != 0 || treeDigest(t, tree) != before {
			t.Fatalf("a dry run began the tree's run (%+v) or changed it", c)
		}
	})
	t.Run("real run", func(t *testing.T) {
		tree, sessions := mk(t)
		var c calls
		res, err := Tree(context.Background(), sessions, opts(tree, sessions, &c, false))
		if err != nil || len(res) != 3 || res[0].Status != StatusUpgraded || res[1].Status != StatusCurrent || res[2].Status != StatusSkipped {
			t.Fatalf("run: %v %v", status(res), err)
		}
		if c.begin != 1 || len(c.prepared) != 1 || c.prepared[0] != 0 || len(c.end) != 1 || c.end[0] != Count(res) || c.end[0].Upgraded != 1 {
			t.Fatalf("calls: %+v", c)
		}
		if _, err := os.Stat(filepath.Join(tree, ".pisess", "quarantine", testCorrelationID)); err != nil {
			t.Fatalf("the original is not in the quarantine: %v", err)
		}
		// Nothing left to upgrade: the run does not begin again.
		var again calls
		res, err = Tree(context.Background(), sessions, opts(tree, sessions, &again, false))
		if err != nil || res[0].Status != StatusCurrent || again.begin != 0 {
			t.Fatalf("second run: %v %v %+v", status(res), err, again)
		}
	})
}
