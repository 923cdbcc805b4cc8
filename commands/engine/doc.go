// Package engine orchestrates a migration: Migrate over trees, and
// RebuildSidecar for fsck --repair's rebuilds and a run's heal. It decides
// which library call each step makes and returns a typed report; it never
// prints (package commands renders reports and maps them to exit codes;
// the other commands call the packages that own them directly).
//
// What it owns: the plan of each session (plan.go, caches.go: migrate,
// refresh, skip, needs repair or refuse), the schedule (schedule.go:
// reading, light and staging places, shared seals, lock waits that give
// a place up, the planners), the per-session flow under the session lock
// (migrate_session.go, refresh.go: read → stage → verify → the store's
// ledger and clean source state → one seal → cutover, or the sidecar
// continued in place), and a run's steps (migrate.go: walk, lock and
// heal, plan and run, end). docs/design.md tells why each is shaped so.
//
// On disk it touches nothing directly but a run's own staging
// directories (beside the sidecar, or in a private temporary directory
// for a dry run), which it removes when a session fails; every other
// write is a library's (ledger, writers, verify, rollback).
//
// Crash story: between the session lock and the cutover a killed run
// leaves at most a staging directory, pisess's own partial output, which
// the next migrate heals and fsck --repair quarantines; from the cutover
// on, rollback's failpoints say what is left. failpoints.go names the
// flow's; the crash harness of package commands kills pisess at each.
//
// Errors mean "could not run"; problems found in a store or a source are
// values in the report. *UsageError (the options are wrong) and
// IsTreeLocked (another run holds a tree lock) are typed so the exit code
// can tell them apart; a source the reference refuses arrives as a
// *readers.RefusedError (AsRefused). An interrupted session is journaled
// as io_failure with a recoverable outcome, the contract's "run it
// again". Tests replace parts of a run through MigrateOptions' seams,
// never package variables, so that they can run in parallel.
package engine
