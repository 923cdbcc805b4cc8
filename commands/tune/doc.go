// Package tune holds pisess's runtime knobs: the settings of the Go
// runtime that make a run faster or smaller than the defaults would, each
// kept while a measurement on the benchmark's machine (scripts/bench, a
// two-CPU virtual machine whose page faults cost ~16 µs of CPU each) says
// it pays. main turns them on first (commands.Tune → Start); a migration
// takes its extra P itself (EnterRun). The figures below are those of the
// commits that made each knob. Issue 33 §2 measured each against its
// absence again (scripts/BENCHMARKS.md, "Runtime knobs"): transparent huge
// pages for the heap went (inside the noise; a steady refresh without them
// is 0.023 of a full migrate, as with them); without GOGC 400 and the extra
// P a migrate --jobs 1 took 1.17x as long (0.857x with both, medians of 3
// alternating rounds, every round's ratio below the default's own spread),
// and without the soft limit a million entries' migration peaked at 80.2
// MiB against the target of 64.
//
//   - GOGC 400 (Start, unless GOGC is set): a run keeps a few megabytes
//     live and allocates per entry; collecting at 5× the live heap rather
//     than 2× cut the collector's share of a migration by about a seventh
//     (9efed98).
//   - The soft memory limit follows the live heap (memlimit.go, unless
//     GOMEMLIMIT is set): the live heap plus 16 MiB (34 to 44 MiB) while it
//     is small, plus a quarter (at least 12 MiB) when it holds more, so that
//     GOGC 400 does not grow a run's RSS: a fixed 64 MiB made the verify of
//     a million entries 3.5× slower, a fixed 128 MiB let large runs grow to
//     140 MB; against a 44 MiB floor, a steady refresh of 2,000 sessions
//     (18 MB live) took ~2,000 fewer page faults and ~5% less CPU (50850a2).
//     TestLimitFor pins the rule. With both, a run over ordinary sessions
//     stays within ~55 MB of RSS, the migration of one session of a
//     million entries (~30 MB live at its peak) within ~65 MB, and verify
//     of that session (~50 MB live) within ~85 MB.
//   - One P more than the runtime's default during a migration, the
//     default while a session of 16 MiB or more is read or staged
//     (procs.go; not when GOMAXPROCS is set): a steady refresh, medians of
//     8-10 alternating runs, 0.40 → 0.37 s (3538756); ten 60 MB sessions
//     5.2-5.4 s with the extra P throughout, 4.2-4.5 s with the default
//     kept for large sessions (8fa1670). The default is the runtime's own,
//     which follows the cgroup's CPU quota: the end of a run puts it back
//     with runtime.SetDefaultGOMAXPROCS, and CPUs, which sizes --jobs and
//     the planners, reads GOMAXPROCS rather than the host's CPUs
//     (TestRunProcsRestoresDefault, TestCPUsFollowGOMAXPROCS).
//   - Profiles (profile_on.go, build tag profile only): a CPU profile to
//     $PISESS_CPUPROFILE, a heap profile at the live heap's peak to
//     $PISESS_MEMPROFILE, an execution trace to $PISESS_TRACE. A diagnosis
//     tool, not a speed-up: release builds do not carry it.
//
// On disk: nothing (the profiles go where their variables say, in a
// profile build only). Crash story: none; every knob is process state that
// ends with the process.
package tune
