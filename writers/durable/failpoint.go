package durable

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The failpoints of this package. A crash at any of them must leave every
// file either old or new (or, for WriteFileInPlace, a state its reader
// treats as stale), and a leftover temp that the next write removes.
const (
	fpBeforeSync   = "durable.before-sync"   // data written (temp, in-place file or appended line), not yet fsynced
	fpBeforeRename = "durable.before-rename" // temp complete and fsynced, or a directory about to move
	fpAfterRename  = "durable.after-rename"  // renamed, directory not yet fsynced
	fpBeforeTrim   = "durable.before-trim"   // in-place file written over from its start, its old end not yet cut
)

func init() {
	Register(fpBeforeSync)
	Register(fpBeforeRename)
	Register(fpAfterRename)
	Register(fpBeforeTrim)
}

// registry holds every failpoint name. It is written only by Register,
// from package init functions, and read afterwards; the mutex makes that
// safe whatever the order.
var registry = struct {
	sync.Mutex
	names map[string]bool
}{names: map[string]bool{}}

// Register declares a failpoint name and returns it; call it from an init
// function or a package variable's declaration in the package that calls
// [Failpoint] with that name, so that [KnownFailpoints] lists it and the
// crash harness tests it. Names follow
// <area>.<before|after>-<step> (lower case, digits and '-' in the step).
// An invalid or duplicate name panics: both are programming errors that
// would otherwise leave a crash point untested.
func Register(name string) string {
	if err := checkFailpointName(name); err != nil {
		panic(err)
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.names[name] {
		panic(fmt.Sprintf("durable: failpoint %q registered twice", name))
	}
	registry.names[name] = true
	return name
}

// KnownFailpoints returns every registered failpoint name, sorted: the
// list the crash harness loops over.
func KnownFailpoints() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, 0, len(registry.names))
	for n := range registry.names {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func checkFailpointName(name string) error {
	bad := fmt.Errorf("durable: failpoint name %q is not <area>.<before|after>-<step>", name)
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 {
		return bad
	}
	for _, area := range strings.Split(name[:dot], ".") {
		if area == "" || !isLowerWord(area, false) || area[0] < 'a' || area[0] > 'z' {
			return bad
		}
	}
	step := name[dot+1:]
	rest, ok := strings.CutPrefix(step, "before-")
	if !ok {
		rest, ok = strings.CutPrefix(step, "after-")
	}
	if !ok || rest == "" || !isLowerWord(rest, true) || rest[0] == '-' || rest[len(rest)-1] == '-' {
		return bad
	}
	return nil
}

func isLowerWord(s string, dash bool) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || dash && c == '-') {
			return false
		}
	}
	return true
}

// parseFailpoints parses PISESS_FAILPOINT: a comma list of names, each
// optionally "@N" for its N-th hit (default the first). It returns name →
// hit number.
func parseFailpoints(s string) (map[string]int, error) {
	armed := map[string]int{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, nth, hasN := strings.Cut(item, "@")
		n := 1
		if hasN {
			var err error
			n, err = strconv.Atoi(nth)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("PISESS_FAILPOINT: bad hit count in %q", item)
			}
		}
		if err := checkFailpointName(name); err != nil {
			return nil, fmt.Errorf("PISESS_FAILPOINT: %w", err)
		}
		armed[name] = n
	}
	return armed, nil
}
