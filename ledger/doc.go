// Package ledger keeps the records of what pisess did: migration_event.v1
// lines (FORMAT.md §7) in a store's own migrations/ledger.jsonl, and the
// tree journal <tree>/.pisess/journal.jsonl, which outlives any store it
// describes (a rollback's receipt cannot live in the store it removes).
//
// # The tree journal
//
// One line per record, appended whole and fsynced. A record is either a
// migration event, byte for byte as the store ledger holds it, or a pisess
// note (schema "pisess.journal_note.v1") carrying what a migration event
// cannot hold but a rollback needs: where a displaced sidecar or an
// upgraded source was quarantined and the digests to check it by.
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
