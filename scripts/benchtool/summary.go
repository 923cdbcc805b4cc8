package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Step is one timed step of scripts/bench, as the script records it: one
// tab-separated line "name seconds cpuSeconds peakRssKB bytes report
// exitCode load1", where report is the path of pisess's --json report or
// "-" and load1 the one-minute load average when the step started.
type Step struct {
	Name       string         `json:"name"`
	Seconds    float64        `json:"seconds"`     // wall clock
	CPUSeconds float64        `json:"cpuSeconds"`  // user + system, the step's processes
	Load1      float64        `json:"load1"`       // machine load when the step started: noise marker
	Bytes      int64          `json:"bytes"`       // the bytes the MB/s figure is over
	MBps       float64        `json:"mbPerSec"`    // 1 MB = 10^6 bytes
	MBpCPUs    float64        `json:"mbPerCpuSec"` // robust to a busy machine, blind to I/O waits
	PeakRSSKB  int64          `json:"peakRssKB"`
	ExitCode   int            `json:"exitCode"`
	Totals     *MigrateTotals `json:"totals,omitempty"` // from pisess migrate --json
}

// MigrateTotals are the members of pisess migrate's report totals the
// benchmark reads, plus the refreshed sessions' source bytes.
type MigrateTotals struct {
	Sessions       int   `json:"sessions"`
	Migrated       int   `json:"migrated"`
	Refreshed      int   `json:"refreshed"`
	Skipped        int   `json:"skipped"`
	NeedsRepair    int   `json:"needsRepair"`
	Refused        int   `json:"refused"`
	Busy           int   `json:"busy"`
	Failed         int   `json:"failed"`
	Entries        int64 `json:"entries"`
	Bytes          int64 `json:"bytes"`
	SourceBytes    int64 `json:"sourceBytes"`
	RefreshedBytes int64 `json:"refreshedSourceBytes"`
}

// Summary is the whole run, as --json-out writes it.
type Summary struct {
	Machine      Machine            `json:"machine"`
	Params       map[string]string  `json:"params"`
	Steps        []Step             `json:"steps"`
	Ratios       map[string]float64 `json:"ratios"`
	Figures      map[string]float64 `json:"figures,omitempty"` // not ratios: medians of repeated steps, in seconds
	Read         *ReadResult        `json:"read,omitempty"`
	GoBenchmarks []GoBenchmark      `json:"goBenchmarks,omitempty"`
	Notes        []string           `json:"notes,omitempty"`
}

// Machine says where the figures were measured.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	MemTotal  string `json:"memTotal"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"goVersion"`
	RSSSource string `json:"rssSource"`
}

// GoBenchmark is one result line of go test -bench.
type GoBenchmark struct {
	Package    string             `json:"package"`
	Name       string             `json:"name"`
	Iterations int64              `json:"iterations"`
	Metrics    map[string]float64 `json:"metrics"` // unit → value: ns/op, MB/s, B/op, allocs/op, custom
}

func runSummary(args []string) error {
	fs := flag.NewFlagSet("summary", flag.ExitOnError)
	stepsPath := fs.String("steps", "", "steps file written by scripts/bench")
	readPath := fs.String("read", "", "JSON of benchtool read")
	benchPath := fs.String("bench", "", "output of go test -bench")
	jsonOut := fs.String("json-out", "", "also write the summary as JSON to this file")
	goVersion := fs.String("go-version", runtime.Version(), "go version line")
	rssSource := fs.String("rss-source", "", "how peak RSS was measured")
	var params paramList
	fs.Var(&params, "param", "key=value recorded in params (repeatable)")
	fs.Parse(args)
	if *stepsPath == "" {
		return errors.New("summary: -steps is required")
	}
	s := Summary{Machine: machine(*goVersion, *rssSource), Params: map[string]string{}, Ratios: map[string]float64{}}
	for _, kv := range params {
		k, v, _ := strings.Cut(kv, "=")
		s.Params[k] = v
	}
	var err error
	if s.Steps, err = readSteps(*stepsPath); err != nil {
		return err
	}
	if *readPath != "" {
		var r ReadResult
		if err := readJSON(*readPath, &r); err != nil {
			return err
		}
		s.Read = &r
	}
	if *benchPath != "" {
		if s.GoBenchmarks, err = parseGoBench(*benchPath); err != nil {
			return err
		}
	}
	s.ratios()
	s.figures()
	s.notes()
	s.print(os.Stdout)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(s, "", "  ")
		return os.WriteFile(*jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

type paramList []string

func (p *paramList) String() string     { return strings.Join(*p, ",") }
func (p *paramList) Set(v string) error { *p = append(*p, v); return nil }

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func readSteps(path string) ([]Step, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var steps []Step
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 8 {
			return nil, fmt.Errorf("%s:%d: want 8 fields, have %d", path, i+1, len(f))
		}
		st := Step{Name: f[0]}
		st.Seconds, _ = strconv.ParseFloat(f[1], 64)
		st.CPUSeconds, _ = strconv.ParseFloat(f[2], 64)
		st.PeakRSSKB, _ = strconv.ParseInt(f[3], 10, 64)
		st.Bytes, _ = strconv.ParseInt(f[4], 10, 64)
		st.ExitCode, _ = strconv.Atoi(f[6])
		st.Load1, _ = strconv.ParseFloat(f[7], 64)
		if f[5] != "-" {
			t, err := migrateTotals(f[5])
			if err != nil {
				return nil, err
			}
			st.Totals = &t
			if t.Refreshed > 0 {
				st.Bytes = t.RefreshedBytes // a refresh rebuilds these only
			}
		}
		if st.Seconds > 0 {
			st.MBps = float64(st.Bytes) / 1e6 / st.Seconds
		}
		if st.CPUSeconds > 0 {
			st.MBpCPUs = float64(st.Bytes) / 1e6 / st.CPUSeconds
		}
		steps = append(steps, st)
	}
	return steps, nil
}

func migrateTotals(path string) (MigrateTotals, error) {
	var rep struct {
		Totals   MigrateTotals `json:"totals"`
		Sessions []struct {
			Action      string `json:"action"`
			Outcome     string `json:"outcome"`
			SourceBytes int64  `json:"sourceBytes"`
		} `json:"sessions"`
	}
	if err := readJSON(path, &rep); err != nil {
		return MigrateTotals{}, err
	}
	for _, s := range rep.Sessions {
		if s.Action == "refresh" && s.Outcome == "done" {
			rep.Totals.RefreshedBytes += s.SourceBytes
		}
	}
	return rep.Totals, nil
}

func (s *Summary) step(name string) *Step {
	for i := range s.Steps {
		if s.Steps[i].Name == name {
			return &s.Steps[i]
		}
	}
	return nil
}

// repeated returns the seconds of the steps named base, "base #2",
// "base #3" and so on (those that ran), sorted.
func (s *Summary) repeated(base string) []float64 {
	var secs []float64
	for i := 1; ; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s #%d", base, i)
		}
		st := s.step(name)
		if st == nil {
			break
		}
		if st.Seconds > 0 {
			secs = append(secs, st.Seconds)
		}
	}
	slices.Sort(secs)
	return secs
}

// figures are the medians of the steps timed more than once for a figure
// of their own: the status of the long session (a 40 ms command is at
// the mercy of one stall; scripts/bench times it five times).
func (s *Summary) figures() {
	for _, st := range s.Steps {
		base, ok := strings.CutPrefix(st.Name, "status ")
		if !ok || strings.Contains(base, "#") {
			continue
		}
		if secs := s.repeated(st.Name); len(secs) > 0 {
			if s.Figures == nil {
				s.Figures = map[string]float64{}
			}
			s.Figures["statusSecondsMedian"] = median(secs)
			s.Figures["statusRuns"] = float64(len(secs))
		}
	}
}

// median is the middle of sorted secs (the lower of the two middles of an
// even count); secs is not empty.
func median(secs []float64) float64 { return secs[(len(secs)-1)/2] }

// ratios are all taken within this one run. Throughput ratios are A's MB/s
// over B's (below 1: A is slower); time ratios are A's seconds over B's.
func (s *Summary) ratios() {
	sha, cp, j1, j2 := s.step("sha256sum"), s.step("cp -a"), s.step("migrate --jobs 1"), s.step("migrate --jobs 2")
	refresh, noop := s.step("refresh 10%"), s.step("no-op re-run")
	put := func(name string, a, b float64) {
		if a > 0 && b > 0 {
			s.Ratios[name] = a / b
		}
	}
	// The machine's own two-way speed-up: what two CPUs give a job that
	// shares nothing (a VM's two vCPUs may be one core's threads), the
	// ceiling of the --jobs ratios below.
	if sha2 := s.step("sha256sum, 2 at once"); sha != nil && sha2 != nil {
		put("sha256sum2SpeedUp", sha.Seconds, sha2.Seconds)
	}
	twoWay := s.Ratios["sha256sum2SpeedUp"]
	if j1 != nil {
		if sha != nil {
			put("migrateJobs1MBpsOverSha256sum", j1.MBps, sha.MBps)
		}
		if cp != nil {
			put("migrateJobs1MBpsOverCp", j1.MBps, cp.MBps)
		}
		if sha != nil {
			put("migrateJobs1CPUOverSha256sumCPU", j1.CPUSeconds, sha.CPUSeconds)
		}
		if j2 != nil {
			put("jobs2SpeedUp", j1.Seconds, j2.Seconds)
			put("jobs2SpeedUpOverMachine2", s.Ratios["jobs2SpeedUp"], twoWay)
		}
		// --jobs 1 is itself a pipeline (a session decoded on one goroutine
		// while the one before is written, verified, installed): the CPUs
		// it keeps busy leave --jobs 2 only the machine's two-way speed-up
		// divided by them, whatever the code does with the second job.
		put("jobs1CPUsBusy", j1.CPUSeconds, j1.Seconds)
		if busy := s.Ratios["jobs1CPUsBusy"]; busy > 0 {
			put("jobs2SpeedUpCeiling", twoWay, max(busy, 1))
		}
		if j4 := s.step("migrate --jobs 4"); j4 != nil {
			put("jobs4SpeedUp", j1.Seconds, j4.Seconds)
		}
		// The same job held to one CPU: what --jobs 1 would be if it were
		// not a pipeline, and what --jobs 2 then gives over it.
		if one := s.step("migrate --jobs 1, one CPU"); one != nil {
			if sha != nil {
				put("migrateJobs1OneCPUMBpsOverSha256sum", one.MBps, sha.MBps)
			}
			if j2 != nil {
				put("jobs2SpeedUpOverOneCPU", one.Seconds, j2.Seconds)
			}
		}
		if j1.Totals != nil {
			calls, _ := strconv.ParseFloat(s.Params["fsyncCalls"], 64)
			put("fsyncCallsPerMigratedSession", calls, float64(j1.Totals.Migrated+j1.Totals.Refreshed))
		}
		if refresh != nil {
			// The steady refresh is timed more than once (scripts/bench):
			// a half-second run is at the mercy of one stall of a noisy
			// machine, so the ratio is the median's, with the extremes.
			secs := s.repeated("refresh 10%")
			if len(secs) > 0 {
				put("refreshSecondsOverFullMigrate", median(secs), j1.Seconds)
			}
			if len(secs) > 1 {
				put("refreshFastestSecondsOverFullMigrate", secs[0], j1.Seconds)
				put("refreshSlowestSecondsOverFullMigrate", secs[len(secs)-1], j1.Seconds)
			}
		}
		if first := s.step("refresh 10%, first"); first != nil {
			put("refreshFirstSecondsOverFullMigrate", first.Seconds, j1.Seconds)
		}
		if noop != nil {
			put("noopSecondsOverFullMigrate", noop.Seconds, j1.Seconds)
		}
		if j1.Totals != nil {
			put("sidecarFrameBytesOverSource", float64(j1.Totals.Bytes), float64(j1.Totals.SourceBytes))
		}
	}
	if r := s.step("read (readers/jsonl)"); r != nil && sha != nil {
		put("jsonlReadMBpsOverSha256sum", r.MBps, sha.MBps)
	}
}

func (s *Summary) notes() {
	for _, st := range s.Steps {
		if st.ExitCode != 0 {
			s.Notes = append(s.Notes, fmt.Sprintf("step %q exited with status %d: its figures are not valid", st.Name, st.ExitCode))
		}
		if t := st.Totals; t != nil && t.Failed+t.Refused+t.Busy+t.NeedsRepair > 0 {
			s.Notes = append(s.Notes, fmt.Sprintf("step %q: %d failed, %d refused, %d busy, %d need repair",
				st.Name, t.Failed, t.Refused, t.Busy, t.NeedsRepair))
		}
	}
	if s.Read != nil && s.Read.Refused > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("read: %d session(s) refused, first: %s", s.Read.Refused, s.Read.FirstRefusal))
	}
}

func (s *Summary) print(w io.Writer) {
	m := s.Machine
	fmt.Fprintf(w, "\n== pisess benchmark: %d CPUs (%s), %s, %s, %s\n", m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.GoVersion)
	var ps []string
	for _, k := range []string{"mb", "sessions", "seed", "treeBytes", "workdir", "filesystem", "cache", "loadavgBefore", "loadavgAfter"} {
		if v, ok := s.Params[k]; ok {
			ps = append(ps, k+"="+v)
		}
	}
	fmt.Fprintf(w, "   %s; peak RSS from %s; 1 MB = 10^6 bytes\n\n", strings.Join(ps, " "), m.RSSSource)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tseconds\tCPU s\tMB\tMB/s\tMB/CPU-s\tpeak RSS MiB\tload\tsessions\t")
	for _, st := range s.Steps {
		what := ""
		if t := st.Totals; t != nil {
			what = fmt.Sprintf("%d migrated, %d refreshed, %d skipped, %d failed", t.Migrated, t.Refreshed, t.Skipped, t.Failed)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n", st.Name, st.Seconds, st.CPUSeconds,
			float64(st.Bytes)/1e6, st.MBps, st.MBpCPUs, float64(st.PeakRSSKB)/1024, st.Load1, what)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range []struct{ key, label string }{
		{"migrateJobs1MBpsOverSha256sum", "migrate --jobs 1 MB/s ÷ cat|sha256sum MB/s"},
		{"migrateJobs1MBpsOverCp", "migrate --jobs 1 MB/s ÷ cp -a MB/s"},
		{"migrateJobs1CPUOverSha256sumCPU", "migrate --jobs 1 CPU s ÷ cat|sha256sum CPU s"},
		{"sha256sum2SpeedUp", "machine's two-way speed-up (sha256sum, 2 halves)"},
		{"jobs2SpeedUp", "speed-up --jobs 2 over --jobs 1 (time 1 ÷ time 2)"},
		{"jobs2SpeedUpOverMachine2", "--jobs 2 speed-up ÷ the machine's two-way speed-up"},
		{"jobs1CPUsBusy", "CPUs --jobs 1 keeps busy (CPU s ÷ time)"},
		{"jobs2SpeedUpCeiling", "  so --jobs 2 can give at most (two-way ÷ that)"},
		{"jobs4SpeedUp", "speed-up --jobs 4 over --jobs 1 (time 1 ÷ time 4)"},
		{"migrateJobs1OneCPUMBpsOverSha256sum", "--jobs 1 held to one CPU: MB/s ÷ cat|sha256sum MB/s"},
		{"jobs2SpeedUpOverOneCPU", "  --jobs 2 over it (time one-CPU 1 ÷ time 2)"},
		{"fsyncCallsPerMigratedSession", "fsync-class calls per migrated session (strace)"},
		{"refreshFirstSecondsOverFullMigrate", "first refresh of 10% stale ÷ full migrate (time)"},
		{"refreshSecondsOverFullMigrate", "refresh of 10% stale, steady (median of 3) ÷ full migrate (time)"},
		{"refreshFastestSecondsOverFullMigrate", "  fastest of the 3 steady refreshes ÷ full migrate"},
		{"refreshSlowestSecondsOverFullMigrate", "  slowest of the 3 steady refreshes ÷ full migrate"},
		{"noopSecondsOverFullMigrate", "no-op re-run ÷ full migrate (time)"},
		{"sidecarFrameBytesOverSource", "sidecar frame bytes ÷ source bytes"},
		{"jsonlReadMBpsOverSha256sum", "readers/jsonl read MB/s ÷ cat|sha256sum MB/s"},
	} {
		if v, ok := s.Ratios[r.key]; ok {
			fmt.Fprintf(w, "  %-52s %8.3f\n", r.label, v)
		}
	}
	if v, ok := s.Figures["statusSecondsMedian"]; ok {
		fmt.Fprintf(w, "  %-52s %8.3f\n", fmt.Sprintf("status of the long session, median of %.0f (seconds)", s.Figures["statusRuns"]), v)
	}
	if r := s.Read; r != nil {
		fmt.Fprintf(w, "\n  readers/jsonl: %d sessions, %d entries, largest session %.1f MB; peak RSS %.1f MB (VmHWM), peak live heap %.1f MB, %.2f bytes allocated per source byte, %d GC cycles\n",
			r.Sessions, r.Entries, float64(r.LargestSession)/1e6, float64(r.PeakRSSKB)/1024, float64(r.PeakHeapBytes)/(1<<20), r.AllocPerByte, r.GCCycles)
	}
	if len(s.GoBenchmarks) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "go benchmark\tMB/s\tms/op\tB/op\tallocs/op\tother\t")
		for _, b := range s.GoBenchmarks {
			var other []string
			for k, v := range b.Metrics {
				switch k {
				case "ns/op", "MB/s", "B/op", "allocs/op":
				default:
					other = append(other, fmt.Sprintf("%g %s", v, k))
				}
			}
			slices.Sort(other)
			fmt.Fprintf(tw, "%s.%s\t%s\t%.3f\t%.0f\t%.0f\t%s\t\n", shortPkg(b.Package), b.Name, fmtOpt(b.Metrics, "MB/s"),
				b.Metrics["ns/op"]/1e6, b.Metrics["B/op"], b.Metrics["allocs/op"], strings.Join(other, ", "))
		}
		tw.Flush()
	}
	for _, n := range s.Notes {
		fmt.Fprintln(w, "NOTE:", n)
	}
}

func fmtOpt(m map[string]float64, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprintf("%.1f", v)
	}
	return "-"
}

func shortPkg(p string) string { return strings.TrimPrefix(p, "pisess/") }

// parseGoBench reads go test -bench output: "pkg:" lines name the package
// of the result lines after them ("BenchmarkX-N  iters  value unit ...").
func parseGoBench(path string) ([]GoBenchmark, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []GoBenchmark
	pkg := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") || len(fields)%2 != 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		name := strings.TrimPrefix(fields[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		b := GoBenchmark{Package: pkg, Name: name, Iterations: n, Metrics: map[string]float64{}}
		for i := 2; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				b.Metrics[fields[i+1]] = v
			}
		}
		out = append(out, b)
	}
	return out, sc.Err()
}

func machine(goVersion, rssSource string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: goVersion, RSSSource: rssSource}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				m.MemTotal = fmt.Sprintf("%.1f GiB RAM", kb/(1<<20))
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return m
}
