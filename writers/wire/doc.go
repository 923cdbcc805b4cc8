// Package wire is the one codec of Session Store V2 (FORMAT.md): every
// document a store holds is encoded and decoded here and nowhere else. It
// imports only the standard library.
//
// # Documents and framing
//
// Line documents are compact JSON followed by "\n"; the Append functions
// write the newline and the Parse functions expect the whole line with it:
//
//	segments/<seq>.seg       one Frame per line (§2)           AppendFrame / ParseFrame
//	index/offsets.jsonl      one IndexRow per frame (§3)       AppendIndexRow / ParseIndexRow
//	migrations/ledger.jsonl  one MigrationEvent per line (§7)  AppendMigrationEvent / ParseMigrationEvent
//	source-state.json        one SourceState, ≤ 4096 bytes (§8) AppendSourceState / ParseSourceState
//
// Whole-file documents are pretty-printed as serde_json's to_vec_pretty
// writes them (two-space indent, no trailing newline), at most 1 MiB:
//
//	manifest.json              Manifest (§5)        AppendManifest / ParseManifest
//	checkpoints/<seq>.json     Checkpoint (§6)      AppendCheckpoint / ParseCheckpoint
//	tmp/rollback.intent.json   RollbackIntent (§6)  AppendRollbackIntent / ParseRollbackIntent
//
// Members are written in the order FORMAT.md lists them. The constant
// members (schema, storeVersion) are not fields: Append writes them and
// Parse checks them.
//
// # Naming
//
// Segment and checkpoint files are named by SegmentFileName and
// CheckpointFileName (16 zero-padded decimal digits, §1); timestamps by
// FormatTimestamp (RFC 3339 UTC, milliseconds, "Z"). Call sites never format
// a name themselves.
//
// # Integrity
//
// CRC32C is CRC-32C (Castagnoli) of a whole frame line with its newline, as
// 8 upper-case hex digits (§3). PayloadSHA256 is the lower-case hex SHA-256
// of the exact payload bytes (§2). ChainStep extends the hash chain, which
// starts at ChainGenesis (§4). ManifestHash is the SHA-256 of the compact
// manifest with manifestHash set to "" (§5).
//
// # Decoding
//
// Decoding follows the reference's serde model: members may come in any
// order, surrounding JSON white space is allowed, and an optional member may
// be absent or null. It refuses what the reference refuses: unknown members
// (except in RollbackIntent and SourceState, whose reference types accept and
// drop them), duplicate members, missing required members, wrong types,
// integers out of range, values that break the reference's patterns (entry
// id, hex digests, CRC, RFC 3339, UUID, enumerations, schema constants),
// documents over their size limit, and anything after the value. Every
// refusal is a *DocError naming the document and the member; a checksum
// mismatch (payload hash or size, manifest hash) also matches ErrChecksum
// under errors.Is. Callers add the path, line or offset.
//
// A frame's payload is checked as serde's RawValue checks it: syntax and
// UTF-8 only (rawscan.go), so a lone surrogate escape or a number beyond
// f64 inside a payload is accepted there, as by the reference, and no
// Value is built for it. One deliberate difference from serde: a struct
// written as a JSON array, which serde's derive would accept field by
// field, is refused; no writer of this format produces one.
package wire
