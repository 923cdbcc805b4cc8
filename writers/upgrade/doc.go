// Package upgrade rewrites a JSONL session of version 1 or 2 as version 3,
// the way the TypeScript pi upgrades it when it opens the file
// (session-manager.js migrateV1ToV2 and migrateV2ToV3, see
// scripts/pi/NOTES.md), so that the reference, which migrates only version
// 3, can then migrate it (issue 3, "Upgrade of old JSONL"). The result is a
// file the real pi reads exactly as it reads the original (same entries,
// parents, leaf and session context) and never rewrites on open.
//
// # What changes
//
//   - Every line whose `type` is "session" (the header, and any later
//     header line) gets `"version":3`: an existing `version` member keeps
//     its place, a missing one is added last, as JavaScript does.
//   - Version 1 (no version, null, or 1): every other entry gets an id and
//     `parentId` = the id of the entry before it (null for the first), as
//     pi does. pi's ids are random; pisess's are the reference's
//     deterministic legacy ids (FORMAT.md §10, payload's LegacyID) computed
//     over the entry as it is read (with `hookMessage` already renamed),
//     taken = every explicit id in the file plus the ids synthesized so far.
//     For an entry the reference's model can read, that is the id
//     jsonl.Open with AllowLegacy shows for the v1 file, so ids do not move
//     across the upgrade. For an entry the model refuses (a v1 `checkpoint`,
//     a compaction without firstKeptEntryId, ...) and for an id-less
//     bashExecution with two or more extra members (whose reference id is
//     not deterministic) the same construction runs over the line's own
//     compact form under pisess's domain "pisess.upgrade.untyped-entry-id.v1"
//     (Result.IDs marks these). Like pi, an entry that already has an `id`
//     member gets a new one too: pi overwrites it, and keeping it could
//     make a member that names it (a label's targetId, an explicit
//     firstKeptEntryId) resolve where pi's upgrade leaves it dangling. The
//     old ids stay "taken", so no new id can equal one.
//     An existing `id` / `parentId` member is overwritten in place (every
//     duplicate of it), a missing one is added last: `…,"id":…,"parentId":…}`.
//   - Version 1 compactions: a numeric `firstKeptEntryIndex` (an index into
//     the file's parsed lines, header = 0) becomes `firstKeptEntryId` by
//     pi's exact rule: the target line must exist and not be a session
//     line; its id is the one it has at that moment (its new id for an
//     earlier entry or the compaction itself; for a later entry the `id`
//     member it has in the file, written as is, or no member at all when it
//     has none). `firstKeptEntryIndex` is then removed. A non-numeric one is
//     left alone.
//   - Message role `hookMessage` → `custom` (type "message", last `message`
//     member an object whose last `role` is "hookMessage": JSON.parse's
//     reading of duplicates).
//
// Every line is pi's own rewrite of it, `JSON.stringify(JSON.parse(line))`,
// in the JavaScript dialect of package jsjson (not wire's serde dialect of
// V2 frames): numbers correctly rounded and written in ECMAScript notation
// (`1.50e3` → `1500`, `0.010665000000000001` unchanged), a duplicate member
// once, with its last value in its first place, integer-like keys first,
// strings escaped as JSON.stringify does (a lone surrogate written back as
// its \u escape). TestUpgradeWritesPisOwnRewrite compares the result byte
// for byte with the real pi's rewrite (ids aside), on generated legacy
// files (fixtures/legacy: every rule of pi's v1 → v2 → v3 migration,
// numbers of every notation, duplicates, white space, line endings, BOM)
// and on the real pi's own sessions relabelled as version 2.
//
// # Which files, and what the reference says of them
//
// The version pi reads decides ([PiVersion], [SniffVersion]): a file pi
// reads as version 1 or 2 is rewritten ([PiVersion.Legacy]); any other
// has its result without being opened ([Settled]: not JSONL, a header pi
// cannot read, already version 3, newer). [LegacyRefusal] is the reason
// migrate gives for a JSONL session that is not a plain version 3: the
// reference's own, and whether this upgrade can help. [Count] totals a
// run's results.
//
// [Run] is `pisess upgrade`'s run: it walks the paths it is given
// (readers/discover; a JSONL file discovery skips but pi reads as a
// session, a header after blank lines or a byte-order mark, is one to
// upgrade), and runs [Tree] on each tree. [Tree] is one tree's run: every
// session in order, the ones the version settles without opening them,
// the locked ones waited for after all the others; its caller's Begin
// (Run's: the tree lock, the journal, the run's start and end records)
// is called only when some file needs an upgrade and this is not a dry
// run, and completes each session's Options (its quarantine path, its
// journal notes, each naming the quarantined original's device and inode,
// ledger.IdentityNote, so that a rollback restores that very file). An
// option Run refuses is an [*OptionError] (commands: exit 16).
//
// # What it may touch on disk
//
// The session files it upgrades (named on the command line or found in a
// tree it is given), with their temps and locks beside them (below), and
// the tree's .pisess/: the tree lock and the journal through package
// ledger, each original's copy under quarantine/<correlation id>/
// (ledger.QuarantinePath). Nothing else, and nothing at all in a dry run
// or in a tree with no file to upgrade (no .pisess/ is created there).
//
// # Lines pi would drop, and what pisess does with them
//
//   - pi reads content.trim().split("\n"): JavaScript white space (tab, VT,
//     FF, space, U+00A0, U+FEFF, Zs, line terminators) before the first
//     line and after the last is cut, so a byte-order mark or a no-break
//     space there is dropped as pi drops it. Blank lines (only such white
//     space, or U+0085) hold no data and are dropped, as pi does.
//   - CRLF: the CR is JSON white space; lines are written with LF only.
//   - A last line without newline is accepted when it is complete JSON; the
//     upgraded file ends with a newline.
//   - Everything pi would silently drop or alter is refused, naming the
//     line and the true reason, and the file is left alone: a torn last
//     line, malformed JSON (including JavaScript white space around a line
//     that is not the first or last: JSON.parse fails on it), invalid UTF-8
//     (Node decodes it to U+FFFD for good), a number out of range (pi would
//     write null), a line over 100 MiB, a line that is JSON but not an
//     object (pi's upgrade throws on it), a first line that is not a
//     session header (pi would truncate the file).
//   - What pi keeps but the reference cannot read is refused too, saying
//     so, since the upgraded file could not be migrated anyway: a lone
//     surrogate escape, nesting past serde_json's limit.
//   - The header version is pi's: the last "version" member, `?? 1`; below
//     2 is version 1, below 3 version 2, 3 is current, above 3 is "not a
//     legacy file" (reported, exit 0: pi never rewrites it).
//
// # Can the reference migrate the result?
//
// The upgraded file is written whatever the answer: it is what pi itself
// would write. Result.Reference says separately whether the reference (and
// so `pisess migrate`) accepts it, with the first line it refuses and why,
// in the reference's order (header, each entry's typed model, then ids,
// parents and cycles), as jsonl.Open would report it.
//
// # Safety
//
// The file is read twice, never held whole: pass 1 validates every line and
// collects the explicit ids; pass 2 rewrites to a temp file beside the
// original. Memory grows with the number of entries (their ids and the
// per-entry report), not with their size. A real run, under the session
// lock <file>.lock:
//
//  1. removes temps of earlier upgrades of this file killed before their
//     rename (<file>.upgrade.<32 hex>.tmp: never the only copy of anything);
//  2. pass 1; failpoint upgrade.before-quarantine;
//  3. pass 2 writes <file>.upgrade.<uuid>.tmp and copies the original
//     byte for byte to <QuarantinePath>.tmp as it reads it; both passes
//     hash the source and must agree;
//  4. the temp gets the original's owner (when root) and mode and is
//     fsynced; the copy gets the session's owner and 0600, is fsynced and
//     renamed to QuarantinePath (its directories 0700); upgrade.after-quarantine;
//  5. the source must still be the file pass 1 read (same inode, size,
//     mtime, ctime); else nothing is recorded, the copy and temp are
//     removed, StatusChanged;
//  6. Options.Record(EventUpgraded) (Run appends the journal note)
//     between upgrade.before-journal and upgrade.after-journal;
//  7. upgrade.before-rename; the temp is renamed over the original and the
//     directory fsynced; upgrade.after-rename;
//  8. the old inode, still open, must not have changed since pass 1: a
//     writer that takes no lock (the TypeScript pi takes none) may have
//     written to it after step 5. If it did, its bytes are copied to
//     <file>.restore.<uuid>.tmp and renamed back over the file (that temp
//     is never removed automatically), Record(EventRestored), StatusChanged.
//
// A crash at any step leaves the original or the upgrade in place (never
// anything else), and a file that is upgraded always has its original in
// the quarantine and a journal note; a re-run converges (crash_test.go,
// -tags failpoints). The tree lock is an flock the kernel releases when
// the run dies, and its holder's text names the dead run to the next one
// (ledger's crash story); a run's start record with no end record is a run
// that died (`pisess runs`), and everything it finished is journaled, so
// `pisess rollback <correlation id>` undoes it as it undoes a whole run. A dry run does all the reading and computing and
// writes nothing at all; it takes the session lock only when the lock file
// already exists.
package upgrade
