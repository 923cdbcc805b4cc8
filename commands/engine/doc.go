// Package engine is pisess's orchestration: one function per command
// (Migrate, Fsck, Rollback, Upgrade, Status, Verify, Runs, Prune, Inspect,
// Build) that decides which library call each step makes, schedules the
// sessions and returns a typed report. It never prints: package commands
// renders every report as text or --json and maps (report, error) to the
// exit code.
//
// What it holds itself:
//
//   - the plan of a migration (planSession: migrate, refresh, skip, needs
//     repair or refuse, from discovery, the refusal cache and the fresh
//     cache's verdicts);
//   - the schedule: runJobs's reading, light and staging places, the seal
//     workers, the lock waits that give a place up (aside.go), fsck's
//     places; the planners (planInto) and the number of jobs (tune.CPUs);
//   - the per-session flow under the session lock (build): read → stage
//     (writers) → verify (verify.VerifiedStaged, VerifiedAppend) → the
//     store's ledger and clean source state → one seal → cutover
//     (rollback.Cutover) or, for a refresh, the incremental paths
//     (refresh_incremental.go, refresh_inplace.go), every phase a journal
//     event with the run's correlation id;
//   - the end of a run: journals synced, displaced sidecars settled, the
//     tree's state files saved (ledger).
//
// Everything else is a library it calls: ledger (.pisess/: journal, tree
// lock, quarantine, runs, prune, state files), verify (checks, fsck's
// findings, the fresh cache's verdicts), rollback (cutover, rollback, fsck's
// repairs, heal, discards), writers (staging), readers/discover (the walk)
// and commands/tune (the migration's extra P).
//
// On disk it touches nothing directly but a dry run's temporary staging
// directory and a run's own staging directories, which it removes when a
// session fails; every other write is a library's. Its crash story is
// theirs: between the session lock and the cutover a killed run leaves at
// most a staging directory (pisess's own partial output, which the next
// migrate heals and fsck --repair quarantines); from the cutover on,
// rollback's failpoints say what is left. The failpoints of the flow are in
// failpoints.go; the crash harness of package commands kills pisess at each.
//
// Errors a function returns mean "could not run"; problems found in a store
// or a source are values in the report. Two errors are typed so that the
// exit code can tell them apart: *UsageError (the options are wrong) and
// IsTreeLocked (another run holds the tree lock). A source the reference
// model refuses arrives as a *readers.RefusedError in the chain
// (AsRefused). Tests replace parts of a run through MigrateOptions' seams,
// never package variables, so that they can run in parallel.
package engine
