// Package store is a Session Store V2 store on disk: its layout and names,
// a writer that builds a new store frame by frame, readers, a checker, and
// the repair primitives fsck builds on. Every document is encoded and
// decoded by package wire; every durable step (fsync, rename, explicit
// modes, no-symlink opens) is package durable's.
//
// # Layout (FORMAT.md §1)
//
//	<root>/                    0700
//	  manifest.json            pretty-printed, atomic through tmp/ (§5)
//	  segments/<16 digits>.seg frames, one per line (§2); *.seg.bak ignored
//	  index/offsets.jsonl      one row per frame (§3), with the first frame
//	  checkpoints/<16 digits>.json  immutable once published (§6)
//	  migrations/ledger.jsonl  migration events, appended durably (§7)
//	  source-state.json        written in place (§8)
//	  tmp/                     temporaries of atomic writes
//	  store.mutation.lock      empty, flocked around changes to a live store
//
// Directories are 0700 and files 0600, set explicitly whatever the umask:
// pi refuses any group or other bit, any symlink on the way, any special
// file. The names come from the functions in layout.go.
//
// # Writing
//
// Create makes the layout in a new or empty directory and returns a Writer.
// Append encodes a frame for the current segment; when the segment is not
// empty and the frame line would take it past the maximum segment size, the
// frame is re-encoded for the next segment (frameSeq 1, fresh timestamp)
// and starts it (§2: the length compared is the first encoding's). Its
// index row goes to the index in the same call, so segments and index never
// disagree about a frame the Writer reported. Frames and rows are buffered,
// not fsynced one by one: a Writer builds a staging store, invisible until
// cutover, and Seal fsyncs the whole tree once before verification and the
// rename that installs it. WriteManifest, WriteCheckpoint, AppendLedger and
// WriteSourceState write the other documents, each in the reference's way.
// ContinueInPlace returns a Writer that goes on after an installed store's
// last frame where it lies (a refresh in place: base.go checks the store,
// its frames read as little as its caller's vouching allows), so that the
// same appends give the bytes a Writer given every entry would; its caller
// holds the store mutation lock and marks the sidecar dirty before the
// first Append (FORMAT.md §8), so that a crash part way leaves a store pi
// does not read.
//
// # Reading
//
// Open, then ReadIndex, ReadFrame, Entries (a streaming iterator with the
// structural checks pi's resume makes), Tail, ActivePath, Manifest,
// Checkpoints, Ledger, SourceState. Read errors carry their place as a
// *CorruptionError{Path, Segment, Offset, Line, Err}; ErrTornTail marks an
// incomplete write, wire.ErrChecksum corruption of once-complete bytes.
//
// # Checking and repairing
//
// Check returns every Problem with a Class (missing_file, torn_tail,
// crc_mismatch, index_out_of_bounds, index_lagging, chain_break,
// manifest_mismatch, invariant_false, bad_document, unindexed_segment,
// bad_mode, symlink). CutTornTail, RebuildIndex and RecomputeManifest are
// the primitives a repair composes; the caller holds the store mutation
// lock (LockMutation) when the store is live. Inspect reads a store whole
// for `pisess inspect`: its manifest, its counts measured from the frames,
// and Check's problems.
package store
