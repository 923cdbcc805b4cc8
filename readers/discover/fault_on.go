//go:build failpoints

package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// PISESS_SOURCE_FAULT injects an error into reading session files, for
// tests of what a run does with an I/O error that passes (issue 32 §2):
// a comma list of op:pattern:errno, where op is "sniff" (discovery's read
// of the header) or "open" (a reader's open of the session), pattern a
// filepath.Match pattern for the file's base name, and errno one of the
// names below. The error is the one the readers report for a failed open
// or read of the file: a *readers.RefusedError of class io. Only builds
// with -tags failpoints read it.
const envSourceFault = "PISESS_SOURCE_FAULT"

var faultErrnos = map[string]syscall.Errno{
	"EIO": syscall.EIO, "EMFILE": syscall.EMFILE, "ENFILE": syscall.ENFILE,
	"ENOMEM": syscall.ENOMEM, "EACCES": syscall.EACCES, "ENOSPC": syscall.ENOSPC,
}

type faultRule struct {
	op, pattern string
	err         syscall.Errno
}

// faultRules parses PISESS_SOURCE_FAULT, once per value it takes (tests
// running pisess in their own process change it between runs).
func faultRules() []faultRule {
	spec := os.Getenv(envSourceFault)
	parsed.Lock()
	defer parsed.Unlock()
	if rules, ok := parsed.rules[spec]; ok {
		return rules
	}
	var rules []faultRule
	for _, item := range strings.Split(spec, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		parts := strings.SplitN(item, ":", 3)
		if len(parts) != 3 || (parts[0] != "sniff" && parts[0] != "open") || faultErrnos[parts[2]] == 0 {
			panic(fmt.Sprintf("%s: %q is not sniff|open:pattern:errno", envSourceFault, item))
		}
		rules = append(rules, faultRule{op: parts[0], pattern: parts[1], err: faultErrnos[parts[2]]})
	}
	parsed.rules[spec] = rules
	return rules
}

// parsed holds the rules of each value of the variable seen.
var parsed = struct {
	sync.Mutex
	rules map[string][]faultRule
}{rules: map[string][]faultRule{}}

// sourceFault returns the errno armed for op on path, or nil.
func sourceFault(op, path string) error {
	for _, r := range faultRules() {
		if ok, _ := filepath.Match(r.pattern, filepath.Base(path)); ok && r.op == op {
			return r.err
		}
	}
	return nil
}
