// Package writers builds Session Store V2 stores from sources, through
// package store, in the reference's bytes (FORMAT.md §2–§5, §7–§8). It has
// two ways to do it:
//
//   - Stage writes every entry of a readers.Source, in order and byte for
//     byte, into a new store in a staging directory, the way the
//     reference's migration fills its own: a migration, and every refresh
//     that cannot be made in place.
//   - AppendInPlace continues an installed store where it lies with the
//     entries its source gained since (a refresh in place): the store is
//     checked (store.ContinueInPlace: its frames CRC-checked, vouched for
//     by the caller, or read for their links when an appended entry
//     branches from an earlier one), every appended entry is read and
//     accepted, the caller's Prepare marks the sidecar dirty, and only then
//     are the frames appended and the manifest replaced. With the same
//     clock, the store is byte for byte the one Stage writes from the whole
//     source.
//
// # On disk
//
// Stage writes only in the directory it is given, which must not exist or
// be empty; AppendInPlace only in the store it continues, whose session
// lock and store.mutation.lock its caller holds; for `pisess build`, a
// sibling of the caller's output directory (OutDirStaging) renamed into
// place (InstallOutDir, both in BuildOutDir, which removes the sibling
// again on failure) once CheckOutDir has said the directory is absent,
// empty or a V2 store. Neither installs,
// removes or fsyncs anything on its own when the caller defers the sync
// (durable.Ops.DeferSync): the caller seals the store once.
//
// # Crash story
//
// A staging directory is invisible to pi by its name until its caller
// renames it into place: killed midway, Stage leaves pisess's own partial
// output, which the next migrate heals and fsck --repair quarantines.
// AppendInPlace writes nothing before Prepare has marked the sidecar
// dirty, which pi does not read: killed after that, it leaves a dirty
// sidecar, some of the new frames and rows in it, which the next run
// rebuilds from the source (FORMAT.md §8). InstallOutDir moves an existing
// output directory aside before the rename and removes it only after, so a
// crash leaves the old store or the new one (and at most a .backup. or
// .staging. sibling).
package writers
