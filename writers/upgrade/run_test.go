package upgrade

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRunOptionError: an option Run refuses is an *OptionError saying
// which and why, before anything in the tree is looked at or written.
func TestRunOptionError(t *testing.T) {
	tree, _ := sessionTree(t, v1Session)
	before := treeDigest(t, tree)
	for _, tt := range []struct {
		opt  RunOptions
		want string
	}{
		{RunOptions{Paths: []string{tree}, CorrelationID: "bad id!"}, `--correlation-id "bad id!": want 8 to 128 characters of A-Z a-z 0-9 . _ : -`},
		{RunOptions{Paths: []string{tree}, LockTimeout: -time.Second}, "--lock-timeout -1s: want a positive duration"},
	} {
		rep, err := Run(context.Background(), tt.opt)
		var oe *OptionError
		if !errors.As(err, &oe) || err.Error() != tt.want || rep.Files != nil {
			t.Errorf("%+v: %v (%+v), want an *OptionError %q", tt.opt, err, rep, tt.want)
		}
	}
	if treeDigest(t, tree) != before {
		t.Error("a refused run changed the tree")
	}
}
