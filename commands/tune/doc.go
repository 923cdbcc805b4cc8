// Package tune holds what pisess asks of the Go runtime: the number of
// CPUs a run may use (CPUs, which sizes --jobs and the planners) and, in a
// build with the profile tag only, the profiles (profile_on.go: a CPU
// profile to $PISESS_CPUPROFILE, a heap profile at the live heap's peak to
// $PISESS_MEMPROFILE, an execution trace to $PISESS_TRACE), a diagnosis
// tool that release builds do not carry.
//
// It held four runtime knobs until issue 33 §2 had each measured against
// its absence, in alternating runs on the same trees (scripts/knobs at
// e24f42b; the table is in scripts/BENCHMARKS.md, "Runtime knobs"): GOGC
// 400, a soft memory limit that followed the live heap, transparent huge
// pages for the heap's first 32 MiB, and one P more than the CPUs during
// a migration. None gained more than the machine's own noise in CPU time
// (a migration of 2,000 sessions and a steady refresh, all-on's CPU within
// ±5% of its median; each knob's off/on ratios straddled 1), and the soft
// limit only undid what GOGC 400 added to RSS. They went, and with them
// PISESS_HUGE_PAGES: the collector and GOMAXPROCS are the runtime's
// defaults, or what GOGC, GOMEMLIMIT and GOMAXPROCS say.
//
// On disk: nothing (the profiles go where their variables say, in a
// profile build only). Crash story: none; all of it is process state that
// ends with the process.
package tune
