// Command testprogress runs `go test -json ...` and says what is running:
// a line when each top-level test starts and ends (with its time and its
// subtests), a line every 15 s while one runs long, a line per package,
// and the whole output of every test that failed. make test runs the crash
// harness through it, whose tests kill hundreds of children for minutes and
// would otherwise print nothing until the end.
//
//	go run ./scripts/testprogress go test -json -tags failpoints -run Crash ./...
//
// It exits with the command's status, and with 1 if the stream reported a
// failure the status did not.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of test2json (go doc test2json).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testprogress go test -json [flags] [packages]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	s := newSummary(os.Stdout)
	done := make(chan struct{})
	go s.heartbeat(done, 15*time.Second)
	s.read(out)
	close(done)
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		code = 2
	}
	if s.failed && code == 0 {
		code = 1
	}
	s.finish(code)
	os.Exit(code)
}

// running is a top-level test in progress: its output (kept to print if
// it fails) and how many subtests ended.
type running struct {
	pkg, name string
	started   time.Time
	output    strings.Builder
	subtests  int
}

type summary struct {
	mu      sync.Mutex
	w       io.Writer
	tests   map[string]*running // package + "\x00" + top-level test
	pkgOut  map[string]*strings.Builder
	failed  bool
	ran     int
	start   time.Time
	failing []string
}

func newSummary(w io.Writer) *summary {
	return &summary{w: w, tests: map[string]*running{}, pkgOut: map[string]*strings.Builder{}, start: time.Now()}
}

func (s *summary) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not test2json (a crash of go itself): pass it on.
			s.mu.Lock()
			fmt.Fprintln(s.w, sc.Text())
			s.mu.Unlock()
			continue
		}
		s.event(e)
	}
}

func (s *summary) event(e event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.w, e.Output)
		return
	case "build-fail":
		s.failed = true
		s.failing = append(s.failing, e.ImportPath+" (build)")
		return
	}
	top, _, isSub := strings.Cut(e.Test, "/")
	if e.Test == "" {
		s.packageEvent(e)
		return
	}
	key := e.Package + "\x00" + top
	t := s.tests[key]
	if t == nil {
		t = &running{pkg: e.Package, name: top, started: time.Now()}
		s.tests[key] = t
		if !isSub {
			fmt.Fprintf(s.w, "run   %s %s\n", short(e.Package), top)
		}
	}
	switch e.Action {
	case "output":
		t.output.WriteString(e.Output)
	case "pass", "fail", "skip":
		if isSub {
			t.subtests++
			return
		}
		delete(s.tests, key)
		s.ran++
		fmt.Fprintf(s.w, "%-5s %s %s (%.1fs, %d subtests)\n", e.Action, short(e.Package), top, e.Elapsed, t.subtests)
		if e.Action == "fail" {
			s.failed = true
			s.failing = append(s.failing, short(e.Package)+" "+top)
			fmt.Fprint(s.w, indent(t.output.String()))
		}
	}
}

// packageEvent handles a package's own lines: its output outside any test
// (a panic, a TestMain message) and its result.
func (s *summary) packageEvent(e event) {
	b := s.pkgOut[e.Package]
	if b == nil {
		b = &strings.Builder{}
		s.pkgOut[e.Package] = b
	}
	switch e.Action {
	case "output":
		b.WriteString(e.Output)
	case "pass", "skip":
		if strings.Contains(b.String(), "[no tests to run]") || e.Action == "skip" {
			return // a package without crash tests: nothing to say
		}
		fmt.Fprintf(s.w, "ok    %s (%.1fs)\n", short(e.Package), e.Elapsed)
	case "fail":
		s.failed = true
		s.failing = append(s.failing, short(e.Package))
		fmt.Fprintf(s.w, "FAIL  %s (%.1fs)\n%s", short(e.Package), e.Elapsed, indent(b.String()))
		// Tests cut short by a panic or a timeout never end: show them.
		for k, t := range s.tests {
			if t.pkg == e.Package {
				fmt.Fprintf(s.w, "      unfinished %s:\n%s", t.name, indent(t.output.String()))
				delete(s.tests, k)
			}
		}
	}
}

// heartbeat names the tests still running every period, so that a long
// one does not look hung.
func (s *summary) heartbeat(done <-chan struct{}, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			s.mu.Lock()
			var names []string
			for _, t := range s.tests {
				names = append(names, fmt.Sprintf("%s %s (%s, %d subtests done)", short(t.pkg), t.name,
					time.Since(t.started).Round(time.Second), t.subtests))
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(s.w, "...   %s\n", n)
			}
			s.mu.Unlock()
		}
	}
}

func (s *summary) finish(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failing) > 0 {
		fmt.Fprintf(s.w, "FAIL: %s\n", strings.Join(s.failing, ", "))
	}
	fmt.Fprintf(s.w, "%d test(s) in %s, exit status %d\n", s.ran, time.Since(s.start).Round(time.Second), code)
}

func short(pkg string) string { return strings.TrimPrefix(pkg, "pisess/") }

func indent(s string) string {
	if s == "" {
		return ""
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("      " + l)
		}
	}
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}
