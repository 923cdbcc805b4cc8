// Package rollback installs verified stores and takes them back out again.
// It holds the three operations of DESIGN.md that move whole stores or cut
// one short, each written so that a crash at any point leaves a state the
// next run recognises and finishes (STYLE.md §5):
//
//   - [Cutover] renames a verified staging store into <stem>.v2. A sidecar
//     already there is first renamed to <stem>.v2.backup.<32 hex> and, once
//     the new one is in place and recorded, moved into the tree's quarantine
//     (never deleted), so that a rollback of the run can put it back.
//   - [ByCorrelation] undoes every cutover and source upgrade of one run
//     (one correlation id), reading the tree journal: each sidecar the run
//     installed goes to <tree>/.pisess/quarantine/<id>/, each sidecar it
//     displaced comes back, each source it upgraded is restored byte for
//     byte. Nothing is deleted, and the receipt of every step is a rollback
//     event in the tree journal, which outlives the stores it describes.
//   - [ToCheckpoint] rolls a store back to one of its checkpoints as the
//     reference does (FORMAT.md §6), under an intent document that recovery
//     ([FinishPending]) rolls forward.
//
// # Locks
//
// Whatever changes a session's sidecar or source holds the session lock
// (<session>.lock, the flock pi takes for its own writes, FORMAT.md §1);
// whatever changes an installed store also holds its store.mutation.lock,
// taken after the session lock, in the reference's order. [Cutover] is
// called by the migration with the session lock already held; the others
// take their locks themselves. flock belongs to an open file, so a process
// that already holds one of these locks must not call a function here that
// takes it again: it would wait for itself ([FinishPendingLocked] exists for
// that case).
//
// # Crash safety
//
// Every step is guarded by a check of what is already done, so each
// operation is idempotent: killed at any point and run again, it finishes;
// run a third time, it changes nothing. The failpoints in [Failpoints] mark
// the steps; built with -tags failpoints, durable.Failpoint kills the
// process there, and the crash tests of this package run every one of them.
package rollback
