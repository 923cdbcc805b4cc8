// Package normalize holds what every source that stores session entries as
// JSON texts (JSONL lines, SQLite rows) does alike, so that both read a
// session exactly as the reference does (FORMAT.md §10):
//
//   - ParseHeader reads a session header as the reference's SessionHeader
//     (serde derive, serde_json 1.0.149), with serde's messages and
//     positions, and CheckHeader applies SessionHeader::validate.
//   - Builder collects, during a first pass over the entries, only what the
//     graph checks need (each entry's id, parent and position; never a
//     payload). Finish then does what the reference does once every entry
//     has parsed, in the reference's order: synthesize legacy ids, refuse
//     duplicate ids, refuse parents that name no entry, refuse parent
//     cycles; and then refuses ids outside the V2 entry-id contract, which
//     the reference only notices when it reads the store back.
//   - Resolve, during the second pass, gives each entry its id (the
//     synthesized one for an id-less entry) and checks that the entry is
//     the one the first pass saw.
//   - LineReader splits a JSONL file into lines on "\n" only, within
//     MaxLineBytes, counting lines and bytes; the JSONL source and the
//     legacy-file upgrader (writers/upgrade) both read with it.
//
// Memory is bounded by a small cost per entry (two short strings and two
// integers); payloads are never held.
package normalize
