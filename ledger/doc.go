// Package ledger keeps what pisess did and owns the tree's .pisess/
// directory as a whole: migration_event.v1 lines (FORMAT.md §7) in a
// store's own migrations/ledger.jsonl, and everything under
// <tree>/.pisess/, which outlives any store it describes (a rollback's
// receipt cannot live in the store it removes):
//
//	journal.jsonl    the tree journal: every run's events, notes and run records (Journal)
//	lock             the tree lock: one pisess run per tree (LockTreeWait, LockTrees, LockTreeForCheck, Hold)
//	quarantine/<id>/ what a run moved out of the tree, never deleted (Quarantiner, QuarantinePath)
//	pruning/         what prune is about to delete (Prune, PruneTrees)
//	refused.json     the refusal cache: sessions refused, by file identity (RefusalCache, IdentityOf)
//	refresh.json     the refresh records: what each installed sidecar was built from (RefreshRecords)
//	fresh.json       the fresh cache's entries: sidecars judged fresh (FreshCache)
//	.ctime-probe-*   FineCtime's probe, removed at once
//
// It may touch nothing else on disk but a store's migrations/ledger.jsonl
// (the caller holds that store's locks), and never follows a symlink there:
// .pisess/ itself must be a real directory, its lock and journal regular
// files (CheckPisessObjects; fsck --repair moves one of the wrong type into
// the quarantine, MendPisess). It reads and
// writes files only; which sessions a run works on, and whether a cached
// verdict still holds, are decided above it (engine, verify).
//
// # Crash story
//
// The journal and the store ledger are appended whole and fsynced (below).
// The tree lock is an flock, released by the kernel when its holder dies;
// the holder's text, which a run writes before its first change to the
// tree (Hold) and clears at its end, lets the next run tell a dead holder
// (a stale lock, taken over and reported) from a live one; a run with
// nothing to do writes none. The state files carry the stamp of the
// pisess that wrote them (Stamp) and are ignored under another.
// Generation tells a run whether another run wrote the tree since it
// looked. A quarantine move is a
// rename recorded by a journal note after it (Quarantiner.Move), a copy is
// written durably before the caller removes the original (Keep). Prune
// moves what it deletes into pruning/ first, rewrites the journal
// atomically, then deletes: killed anywhere, it leaves at most pruning/,
// which the next prune removes. The state files (refused.json,
// refresh.json, fresh.json) only save work: each is replaced atomically
// without a sync, and read as untrusted data (bounded, never followed,
// every entry checked against the files it names), so a crash leaves the
// old file or none, and costs work, never a wrong verdict.
//
// # The state files
//
// refused.json keeps each refused session with its file identity (device,
// inode, size, modification and change times) and is written only when it
// changes. fresh.json keeps, for each sidecar judged fresh, a digest of the
// lstat metadata (inode, type and mode, links, owner, size, modification
// and change times) of every file and directory of the sidecar and one of
// the session file's, with what the status saw; a run that finds the same
// digests skips the session with one fstatat per file, and its walk takes
// the header's version from the entry instead of reading the session file
// (freshcache.go says when a verdict may be kept). A system clock stepped
// back by more than 2 s while a run plans is the one change it cannot see,
// as racily-clean git cannot. refresh.json keeps what each installed
// sidecar was built from (RefreshRecord; docs/design.md says how a
// refresh uses it), every member of an entry required: the file is
// stamped, so an entry that lacks one (or whose SHA-256 states do not
// finish as their digests) was written by no pisess that reads it, and is
// dropped when read, its session's next refresh a full rebuild. Keys are
// tree-relative names; anything else is dropped.
//
// # The tree journal
//
// One line per record, appended whole and fsynced. A record is a
// migration event, byte for byte as the store ledger holds it, a pisess
// note (schema "pisess.journal_note.v1") carrying what a migration event
// cannot hold but a rollback needs: where a displaced sidecar or an
// upgraded source was quarantined and the digests to check it by (and its
// device and inode, "dev=D ino=I": IdentityNote, ParseIdentity, so that a
// rollback acts on that very file or directory only), or a run
// record (schema "pisess.journal_run.v1"): a run's start, written with its
// first other record, and its end with its summary (RunRecord; JournalRuns
// reads a run from them, Runs every tree's for `pisess runs`, a start with no end being a run that died;
// Summary sizes a tree's journal and quarantine and names its last run).
//
// Phases are pisess's dirty bit, as golang-migrate's version+dirty: a run
// writes an intent (planned, staging_copy, integrity_check, cutover_commit)
// before it acts and an outcome (completed or failed) after. An intent with
// no outcome is the signal that a run died; [Journal.Unfinished] reports
// each as an [*UnfinishedError] naming the command that resolves it.
//
// Reading is tolerant: a line that does not parse, a torn last line
// included, is reported as a [BadLine] and skipped, never fatal. Before an
// append after a torn line, the journal terminates that line, so the new
// record stays whole and the fragment is kept as evidence.
//
// Within a process a Journal serialises its appends with a mutex; across
// processes the tree lock <tree>/.pisess/lock keeps pisess runs apart. The
// store ledger is not locked here: a staging store is private to its run,
// and changes to an installed store are made under its store.mutation.lock,
// which the caller holds (a second flock of it here would wait on itself).
package ledger
