// Package verify checks sidecars and never writes. It answers four
// questions, each a FORMAT.md section:
//
//   - Is the sidecar fresh? [Freshness] decides as the reference does from
//     source-state.json and the source's fingerprint (§8); [Fingerprint]
//     takes one.
//   - Would pi accept it? [Acceptance] checks every rule of §11 pisess can
//     check: directory and file types, private modes, ownership, no symlink
//     on the way or inside, the index and manifest rules of resume, the
//     session id and source format, no pending rollback intent.
//   - Is it the source, exactly? [AgainstSource] streams the source and the
//     store side by side and computes the reference's three verification
//     flags (§9) and the invariants INV-001..INV-007, with findings.
//   - What is it? [Status] classifies a session with the reference's five
//     classes (§9) and pisess's finer findings beneath them, every frame
//     read; [StatusOpen] is at least as deep as pi's own open of the
//     sidecar (every frame up to 10,000 entries, else the index against
//     the segments and each segment's last frame: [LazyHydrationThreshold]),
//     what migrate plans by; [StatusFast] reads no frame body and decides
//     only what it can (a missing part, the manifest, freshness).
//
// [Verified] combines the last three for a staging store about to be cut
// over and returns a [Passed], a proof that only this package can make:
// rollback.Cutover takes one, so no unverified store can be installed.
// [Sidecar] combines them for an installed sidecar, as `pisess verify`
// reports it (a [Verdict]); [StatusOf] is a session's line of `pisess
// status` ([Status], or the fresh cache's word, with the session's name),
// and [ClassOrder] the order reports list the classes in. [ListStatus] and
// [Sidecars] walk whole trees for `pisess status` and `pisess verify`.
//
// Two more questions are pisess's own:
//
//   - What does fsck find? [CheckSession] is fsck's examination of one
//     session (the class, the verification against the source, the
//     leftovers of an interrupted run) as [FsckFinding]s, each with the
//     [RepairAction] that mends it; [StaleLockFinding], [JournalFindings],
//     [OrphanFindings] and [MendedFindings] are a tree's own, and
//     [SumFsck] totals them. rollback.Fsck runs these checks over a tree
//     (under its lock, so many sessions at once) and rollback.Repairer
//     acts on them; this package only finds.
//   - Is a verdict of an earlier run still good? [FreshCache] judges the
//     fresh cache's entries (kept by ledger.FreshCache) by the metadata
//     digests of the files they name ([MetaDigest], [SourceDigest], a
//     SQLite session's -wal included), and stands in for [StatusOpen]
//     where nothing changed since; it keeps only verdicts as deep.
//
// Findings are values, not errors: each names the file, the rule (Code) and
// the repair that would apply. An error from this package means the check
// itself could not be made (an unreadable source, an I/O error), never that
// something was found.
//
// # On disk
//
// It reads sessions, sidecars, their staging and backup siblings, and
// through package ledger the tree journal and fresh.json; it writes
// nothing (a FreshCache's Settle asks its judges' FineCtime, ledger's
// probe, whether the file system's change times are fine). Having nothing
// to leave half done, it has no crash story: a check killed midway is run
// again.
//
// The store-internal checks (frames, index, manifest, checkpoints) are
// writers/store's Check and Iterator; this package maps their problems to
// findings and adds what needs the source or the typed entry model.
package verify
