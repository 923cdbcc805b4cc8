// Package jsonl reads a pi session stored as JSONL (versions 1 to 3) into
// the normalized model, exactly as the reference reads it for migration
// (FORMAT.md §10; session.rs read_capped_utf8_line, read_jsonl_entries_for_v2,
// finalize_loaded_entries, SessionHeader::validate):
//
//   - Lines are split on "\n" only; a CR before it is JSON white space. A
//     line is at most MaxLineBytes, newline excluded, and must be UTF-8.
//   - Line 1 is the header, read after Rust's trim(). An empty file, a
//     blank first line and a byte-order mark are refused (the reference
//     does not skip a BOM: U+FEFF is not White_Space, so serde_json sees
//     it and reports "expected value at line 1 column 1"; pisess refuses
//     with that detail and says why).
//   - Every other line that Rust's trim() leaves empty (Unicode White_Space,
//     not only ASCII) is skipped; the rest must each be one entry the
//     reference's typed model accepts (readers/payload). A last line without
//     newline is read like any other; cut off inside its JSON it is refused
//     as a torn line.
//   - Once every line has parsed: legacy ids, duplicate ids, missing
//     parents, cycles, then V2 entry-id contract (readers/normalize), so
//     the first problem reported is the one the reference reports first.
//
// Open reads the file twice and never holds it whole: pass 1 checks every
// line and keeps only ids, parents and positions; pass 2 (Next) streams
// the entries with their canonical payloads. Pass 1 hashes the bytes it
// reads; the file's status (size, device, inode, change and modification
// times) must be the same at the open, after pass 1 and after pass 2, and
// pass 2 must end where pass 1 did: a file that changes between or during
// them is refused (class io), so SHA256, Size and FileInfo describe
// exactly the bytes the entries came from. The file is opened
// O_RDONLY|O_NOFOLLOW and never written.
//
// With Options.Light (migration, which reads every entry anyway), pass 1
// reads of each line only its top-level id and parentId (scanLinkIDs) and
// pass 2 is the one decode of each entry. The answer is the same: any
// problem pass 1 meets makes it start over as the full pass, and pass 2
// refuses the first entry the typed model rejects, so the refusal names
// the line and reason the reference gives, from Next instead of Open.
package jsonl
