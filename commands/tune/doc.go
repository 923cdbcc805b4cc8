// Package tune holds what pisess asks of the Go runtime: the number of
// CPUs a run may use (CPUs, which sizes --jobs and the planners), a soft
// memory limit that follows the live heap (memlimit.go; unless GOMEMLIMIT
// is set) and, in a build with the profile tag only, the profiles (profile_on.go: a CPU
// profile to $PISESS_CPUPROFILE, a heap profile at the live heap's peak to
// $PISESS_MEMPROFILE, an execution trace to $PISESS_TRACE), a diagnosis
// tool that release builds do not carry.
//
// It held four runtime knobs until issue 33 §2 had each measured against
// its absence, in alternating runs on the same trees (scripts/knobs at
// e24f42b; the tables are in scripts/BENCHMARKS.md, "Runtime knobs"): GOGC
// 400, the soft memory limit, transparent huge pages for the heap's first
// 32 MiB, and one P more than the CPUs during a migration. GOGC 400, the
// huge pages and the extra P gained nothing outside the machine's own
// noise in CPU time (all-on's CPU within ±5% of its median; each knob's
// off/on ratios straddled 1) and went, with PISESS_HUGE_PAGES. The soft
// limit stays: with the collector at the runtime's default (GOGC 100),
// the bench without it measured the migration of a million entries at
// 80.2 MiB of RSS (target 64; 56.1 with it) and --jobs 2 on the default
// tree at 71.1 MB (see BENCHMARKS.md for the run with it).
//
// On disk: nothing (the profiles go where their variables say, in a
// profile build only). Crash story: none; all of it is process state that
// ends with the process.
package tune
