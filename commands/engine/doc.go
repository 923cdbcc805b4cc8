// Package engine is pisess's orchestration: one function per command
// (Migrate, Upgrade; package commands calls the libraries for the others,
// fsck's rebuilds through FsckRebuild) that decides which library call
// each step makes, schedules the sessions and returns a typed report. It
// never prints: package commands renders every report as text or --json
// and maps (report, error) to the exit code.
//
// What it holds itself:
//
//   - the plan of a migration (plan.go: planSession, planByStatus —
//     migrate, refresh, skip, needs repair or refuse, from discovery, the
//     refusal cache (caches.go) and the fresh cache's verdicts);
//   - the schedule (schedule.go): runJobs's reading, light and staging
//     places, the seal workers, the lock waits that give a place up
//     (rollback.LockAside, rollback.WaitWithout; fsck's places are
//     rollback.Fsck's); the planners (planInto) and the number of jobs
//     (tune.CPUs);
//   - the per-session flow under the session lock (migrate_session.go:
//     build, then full): read → stage (writers) → verify
//     (verify.VerifiedStaged, VerifiedAppend) → the store's ledger and
//     clean source state → one seal → cutover (rollback.Cutover) or, for a
//     refresh, the sidecar continued in place (refresh.go), every phase
//     a journal event with the run's correlation id;
//   - a migrate run's steps (migrate.go): walk, lock and heal, jobs, plan
//     and run, the end of the run (journals synced, displaced sidecars
//     settled, the tree's state files saved);
//   - the other commands' runs: which trees they lock, in what order they
//     take the sessions, what they journal (fsck.go, heal.go, rollback.go;
//     upgrade.go runs each tree through upgrade.Tree and keeps its lock
//     and journal notes), and the ones that make one library call per run
//     (verify.ListStatus, verify.Sidecars, store.Inspect,
//     writers.BuildOutDir, ledger.Runs, ledger.PruneTrees);
//   - the typed reports (migrate_report.go and each command's file).
//
// # The schedule
//
// Sessions go through a pipeline: --jobs N lets N sessions have their
// source's first pass, N be staged (the source decoded on one goroutine
// while the entries before are encoded, hashed and written on another)
// and the rest be read back, verified and installed (the seal, the journal
// sync, the rename: mostly waiting on the disk), so that even --jobs 1
// keeps two CPUs busy. At most N sessions are staged at once, and a
// session waits for a staging place before the next one's first pass
// starts. N more reading places are for small refreshes in place (a
// sidecar of at most lightEntries entries whose session gained at most
// lightAppended bytes: each holds under 8 MB), so that a steady cron
// refresh reads two sessions at once even at --jobs 1; one that turns out
// to need a full rebuild waits for a full place first. A session whose
// lock pi holds gives its place up while it waits (rollback.LockAside), so the
// sessions after it go on meanwhile.
//
// # The seal
//
// A staging store is written without a single fsync: it is invisible to
// pi until its rename. It is sealed by one syncfs (durable's seal: an
// fsync of each file elsewhere than Linux), which concurrent sessions
// share (a seal lingers sealLinger for others to join). The seal's
// descriptor is opened before the store's first byte is written
// (durable.OpenSeal), so that its syncfs reports the writeback error of
// any of its files, whoever saw it first. Once sealed, its
// segments and index are dropped from the page cache (durable's
// DropCached, posix_fadvise POSIX_FADV_DONTNEED, on Linux): verification
// has read them back and the next to read them is pi, later, so migrating
// a tree does not push out of the cache what the machine was using, and
// the next session's files are written into the pages just given back. A
// migrated session costs three sync calls: the seal, the journal's
// cutover record, and the directory after the rename; the journal's
// progress records ride on them and on one sync at the end of the run.
//
// # The two refresh paths
//
// pi only appends whole lines to a session and marks its sidecar dirty
// when it does (FORMAT.md §8; the TypeScript pi leaves its fingerprint
// instead). The refresh record of a sidecar (ledger.RefreshRecord, in
// .pisess/refresh.json, written after each install, every member
// required) keeps the source's length, SHA-256, SHA-256 state and
// XXH3-128 of the bytes the sidecar was built from, and the store's entry
// count, chain, index digest and its SHA-256 state, manifest inode and
// manifest digest: data, never an address. When it shows that the session
// still begins with exactly those bytes (one read of the prefix for its
// XXH3; the SHA-256 of the whole file goes on from the recorded state over
// the new bytes only), followed by whole new lines, the sidecar is
// continued in place (refresh.go), under the session lock and the store's
// store.mutation.lock:
//
//  1. the store is checked against the record (which vouches for the
//     manifest and the index) and its frames read as little as they may
//     be: not at all when the fresh cache vouches for the sidecar frame
//     for frame (a refresh or install wrote and checked it, on a file
//     system whose change times show every later change, and every one of
//     its files is as it left them: the index rows are then read for
//     their ids only, their digest going on from the record's
//     indexSha256State); else CRC-checked against their index rows, not
//     parsed, on a goroutine of their own while the rows are read; and
//     read and parsed for their links only when a new entry branches from
//     an earlier one (whose branch count only the old frames hold: the
//     store is then checked again that way, before anything is written);
//  2. every new entry is read and checked (and the next session's reading
//     begins);
//  3. the journal records the cutover (cutover_commit, an installed note
//     naming the sidecar) and that the sidecar as it was is not kept (a
//     discarded note: the session file holds its entries), and the sidecar
//     is marked dirty: from here to the end pi reads the session file;
//  4. the new frames are appended to the last segment (or new ones), the
//     index rows appended, the manifest replaced through tmp/ and the
//     store's ledger rewritten in place (as the reference writes ledgers),
//     then verified (the new frames read back against the source's
//     entries, the manifest, the acceptance rules);
//  5. one shared syncfs seals it all, which also writes back the run's
//     journal records when the journal is on the same file system (else
//     the journal is fsynced), and a clean source-state.json commits it.
//
// One seal per session, no copy, nothing to discard. A power loss may keep
// some of the new bytes and lose the journal records or the dirty mark:
// the sidecar is then dirty, or stale by its fingerprint (the session
// grew), never clean, and the next run rebuilds it. Anything else — no
// record or one that does not match, a changed prefix, a torn last line,
// a damaged old store, a new entry that refers forward, more than
// writers.MaxInPlaceBytes of new payloads, a store mutation lock that
// another process holds, --keep-displaced (a sidecar continued in place
// displaces nothing to keep), a sidecar that does not verify after the
// append — is a full rebuild from the whole source, built and installed as
// a migration is (the old sidecar displaced). A third path, through a
// staging copy of the old store, served the branches, large appends, held
// locks and --keep-displaced until issue 33: at ~0.26 of a full rebuild
// for a 100 MB session (scripts/BENCHMARKS.md), it bought those rare cases
// less than the in-place path now does for branches, and the others are
// rebuilt. Each path writes the store byte for byte as a full rebuild does
// (tested on every vector set, for each way the frames are read).
//
// # Interrupts
//
// A session interrupted by SIGINT or SIGTERM is journaled as a failed
// event with outcome recoverable_error and error class io_failure: the
// ledger's contract has four error classes and no "cancelled"; io_failure
// with a recoverable outcome is the one that says "the run stopped for a
// reason outside the data, run it again", where integrity_mismatch or
// atomicity_violation would claim damage that is not there.
//
// Everything else is a library it calls: ledger (.pisess/: journal, tree
// lock, quarantine, runs, prune, state files, a tree's summary, a file's
// identity), verify
// (checks, a sidecar's verdict, a session's status line, fsck's findings
// and totals, the fresh cache's verdicts), rollback (cutover, rollback,
// fsck's repairs, heal, discards), writers (staging; build's output
// directory), writers/upgrade (the rewrite, which files it takes, a
// tree's run, the reason a legacy header is refused), writers/store (inspect's counts),
// readers/discover (the walk, a command's paths and trees) and
// commands/tune (the number of CPUs, which sizes the jobs, and the
// migration's extra P).
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
