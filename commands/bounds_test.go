package commands

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/fixtures/trees"
)

// TestNumericBounds (issue 32 §5): every numeric flag has a range; a value
// outside it, from the command line or from the environment, is a usage
// error (16) that names the flag or the variable with its value, given at
// once and without touching the tree (PISESS_JOBS=99999999999 used to grow
// pisess to 2.5 GB and hold the tree lock for 15 minutes).
func TestNumericBounds(t *testing.T) {
	dir := t.TempDir()
	trees.Copy(t, dir, trees.Only(trees.Vectors(t, trees.Accept), "accept/tricky"))
	before := fixtures.TreeDigest(t, dir)
	for _, c := range []struct {
		env, value string // a variable, or ""
		args       []string
		want       string
	}{
		{"PISESS_JOBS", "99999999999", []string{"migrate", dir}, "PISESS_JOBS=99999999999: above the maximum of 256"},
		{"PISESS_JOBS", "100000", []string{"fsck", dir}, "PISESS_JOBS=100000: above the maximum of 256"},
		{"PISESS_JOBS", "-1", []string{"migrate", dir}, "PISESS_JOBS=-1: below the minimum of 0"},
		{"", "", []string{"migrate", "--jobs", "100000", dir}, "--jobs 100000: above the maximum of 256"},
		{"", "", []string{"migrate", "-j", "257", dir}, "--jobs 257: above the maximum of 256"},
		// The command line wins, and is what the error names.
		{"PISESS_JOBS", "4", []string{"migrate", "--jobs=300", dir}, "--jobs 300: above the maximum of 256"},
		{"PISESS_LOCK_TIMEOUT", "2h", []string{"migrate", dir}, "PISESS_LOCK_TIMEOUT=2h: above the maximum of 1h"},
		{"", "", []string{"upgrade", "--lock-timeout", "-5s", dir}, "--lock-timeout -5s: below the minimum of 0s"},
		{"", "", []string{"rollback", "--tree", dir, "--lock-timeout", "90m", "some-run-0001"}, "--lock-timeout 1h30m: above the maximum of 1h"},
		{"PISESS_LOCK_WAIT", "1000h", []string{"fsck", "--repair", dir}, "PISESS_LOCK_WAIT=1000h: above the maximum of 24h"},
		{"", "", []string{"prune", "--keep-within", "2000000h", dir}, "--keep-within 2000000h: above the maximum of 876000h"},
		{"", "", []string{"prune", "--keep-within", "-1h", dir}, "want a number and a unit"}, // refused by the parser (TestKeepWithinUnits names the flag)
		{"", "", []string{"migrate", "--max-segment-bytes", "100", dir}, "--max-segment-bytes 100: below the minimum of 4096"},
		{"", "", []string{"migrate", "--max-segment-bytes", "67108865", dir}, "--max-segment-bytes 67108865: above the maximum of 67108864"},
	} {
		if c.env != "" {
			t.Setenv(c.env, c.value)
		}
		start := time.Now()
		r := pisessWithin(t, 10*time.Second, c.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s=%s pisess %v: want exit 16 and %q: %s", c.env, c.value, c.args, c.want, r)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v took %s to refuse", c.args, d)
		}
		rj := pisessWithin(t, 10*time.Second, append([]string{c.args[0], "--json"}, c.args[1:]...)...)
		if rj.code != ExitUsage || !strings.Contains(rj.stdout, c.want) {
			t.Errorf("--json: %s", rj)
		}
		if c.env != "" {
			t.Setenv(c.env, "")
		}
	}
	if after := fixtures.TreeDigest(t, dir); len(after) != len(before) {
		t.Errorf("a refused run wrote in the tree")
	}
	// The bounds themselves are accepted, and --help says them.
	t.Setenv("PISESS_JOBS", "256")
	if r := pisess(t, "migrate", "--dry-run", "--lock-wait", "24h", "--lock-timeout", "1h", dir); r.code != ExitClean {
		t.Errorf("at the bounds: %s", r)
	}
	if r := pisess(t, "migrate", "--help"); !strings.Contains(r.stdout, "(0 to 256)") || !strings.Contains(r.stdout, "(0s to 24h)") || !strings.Contains(r.stdout, "(4096 to 67108864)") {
		t.Errorf("migrate --help does not give the ranges:\n%s", r.stdout)
	}
}

// pisessWithin is pisess with the run canceled after d: a value pisess
// should refuse at once must not keep a test for minutes when it does not.
func pisessWithin(tb testing.TB, d time.Duration, args ...string) result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, append([]string{"pisess"}, args...), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}
