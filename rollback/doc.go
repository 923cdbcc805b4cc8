// Package rollback installs verified stores and takes them back out again.
// It holds the three operations of DESIGN.md that move whole stores or cut
// one short, each written so that a crash at any point leaves a state the
// next run recognises and finishes (STYLE.md §5):
//
//   - [Cutover] renames a verified staging store into <stem>.v2. A sidecar
//     already there (a store, or a file, FIFO or symlink pi refuses: the
//     entry itself) is first renamed to <stem>.v2.backup.<32 hex> and,
//     once the new one is in place and recorded, moved into the tree's
//     quarantine (never deleted), so that a rollback of the run can put it
//     back; a displaced note that cannot be written fails the cutover.
//   - [ByCorrelation] undoes every cutover and source upgrade of one run
//     (one correlation id), reading the tree journal: each sidecar the run
//     installed goes to <tree>/.pisess/quarantine/<id>/, each sidecar it
//     displaced comes back, each source it upgraded is restored byte for
//     byte. Nothing is deleted, and the receipt of every step is a rollback
//     event in the tree journal, which outlives the stores it describes.
//     [InTrees] does it in every tree a command names, each under its
//     tree lock, and flattens the results into a report's rows.
//   - [ToCheckpoint] rolls a store back to one of its checkpoints as the
//     reference does (FORMAT.md §6), under an intent document that recovery
//     ([FinishPending]) rolls forward.
//
// It also holds what fsck --repair and a migration's self-healing do to a
// tree (DESIGN.md's repairs):
//
//   - [Fsck] is fsck's run over session trees: for each, the .pisess/
//     objects of the wrong type moved aside (with Repair), the tree lock
//     (a dead run's taken over; a check records no holder in it), the run's
//     records in the journal, verify's findings for the tree and for each
//     session, Jobs sessions at a time (a session waiting for a lock pi
//     holds gives its place up: [LockAside], [WaitWithout], which the
//     migration's schedule uses too), and with Repair a [Repairer] for
//     each. Without Repair it writes nothing. [Heal] is the same run,
//     under migrate's tree lock, over what [NeedsHeal] selects.
//   - [Repairer] mends one session or one tree from verify's findings:
//     staging leftovers go to the quarantine, a backup comes back when no
//     sidecar is installed and it verifies, torn tails are cut (kept
//     first), the index and manifest are recomputed from the frames (the
//     old ones kept), modes and owner are set, a pending rollback is
//     finished, and anything else — an in-place repair that failed
//     included — is rebuilt from the source through the migrate pipeline,
//     which its caller (engine) gives it as Rebuild, under the session lock
//     held since the check; every move is reported as a finding. The
//     repairs made before it ran (.pisess objects moved aside, a dead
//     run's tree lock taken over) it journals ([Repairer.Mended],
//     [Repairer.TookOverLock]).
//   - [NeedsHeal] selects what an interrupted pisess run left (staging and
//     backups recognisably pisess's) for migrate to repair before it
//     plans.
//   - [Discarder] removes, while a migrate run goes on, the displaced
//     sidecars it need not keep (pisess built them and the source still
//     begins with their bytes), each after a synced journal note.
//   - [RemoveStaging] removes a run's own staging directory when its
//     session failed, by descriptor; one that cannot be removed yet waits
//     in [Leftovers] for the end of the run, then for the next run's heal.
//
// A displaced sidecar is reproducible when its own ledger's completed
// event belongs to the run the session's refresh record names for this
// very store, or to a run the tree's journal knows (the record still
// vouches after prune has dropped that run, and spares each run a read of
// the whole journal), and the session file still begins with the bytes it
// was built from. Which bytes those are is said by its source-state.json
// fingerprint or, once pi has marked it dirty (which drops the
// fingerprint: the everyday case), by the refresh record the run found
// when that record is about this very store (same manifest inode, entry
// count and chain). A SQLite database never keeps the bytes a
// sidecar was built from (its pages are rewritten): its displaced sidecar
// is reproducible when the database still holds its entries — the same
// session id, and a manifest whose entry count and chain are the new
// build's after as many entries (writers.StageOptions.PrefixEntries; the
// chain covers every payload byte). A sidecar a heal displaces (damaged)
// is always kept. A copy not kept is removed while the run
// goes on: its discarded note is made durable first (one journal sync for
// the notes of all the sessions finished meanwhile), then the copy is
// removed. The move of a displaced sidecar into the quarantine is made
// durable at the end of the run, one sync per directory, and only for the
// copies kept (a crash before leaves a copy at its backup name, where
// rollback and fsck find it): a refresh by a full rebuild costs the seal,
// the journal's cutover record and the two renames' directory syncs.
//
// It touches the session's sidecar, its staging and backup siblings and
// the tree's .pisess/ (through package ledger: the journal, the
// quarantine), removing a directory only by descriptor
// (durable.Ops.RemoveAll: a parent swapped for a symlink is never
// followed), never the session file but for a rollback's restore of an
// upgraded source; it reads readers/discover to list a session's leftovers
// again and read its header.
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
//
// The repairs keep the same rule: whatever a repair removes is in the
// quarantine, with its journal note, before it is gone from the tree
// (ledger.Quarantiner), so that a repair killed midway leaves either the
// damage, found again by the next fsck, or its repair. A discard removes a
// displaced copy only after the note that says so is synced: a crash
// between the two leaves an extra copy, which prune removes with its run,
// never a missing one unrecorded. A run of [Fsck] with Repair brackets its
// journal notes with run records (ledger.RunRecord, written with its first
// repair); one killed midway leaves a start with no end, which the next
// run that repairs in the tree names among the runs it healed
// (ledger.UnendedRuns) in its own end record. The crash harness of package
// commands (TestCrashMigrate, TestCrashHealMigrate, TestCrashFsckRepair)
// kills migrate and fsck --repair at every failpoint, these included.
package rollback
