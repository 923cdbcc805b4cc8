// Package writers builds Session Store V2 stores from sources: Stage writes
// every entry of a readers.Source, in order and byte for byte, into a new
// store through package store, the way the reference's migration fills its
// staging directory (FORMAT.md §2–§5, §7–§8). StageAppend and
// AppendInPlace continue a store whose source only grew (a refresh), each
// writing the store byte for byte as Stage would from the whole source.
//
// # On disk
//
// It writes only the store directory its caller names: a staging
// directory (<stem>.v2.staging.<uuid>, invisible to pi by its name), a
// sidecar its caller holds the locks of (AppendInPlace), or, for `pisess
// build`, a sibling of the caller's output directory (OutDirStaging)
// renamed into place (InstallOutDir) once CheckOutDir has said the
// directory is absent, empty or a V2 store. It never installs a sidecar
// (rollback's cutover does) and never removes anything it did not write.
//
// # Crash story
//
// A staging store is pisess's own partial output until its caller installs
// it: killed midway, Stage leaves a staging directory that the next
// migrate's heal or fsck --repair quarantines. InstallOutDir moves an
// existing output directory aside before the rename and removes it only
// after, so a crash leaves the old store or the new one (and at most a
// .backup. or .staging. sibling). AppendInPlace changes a sidecar only
// after its caller's Prepare (the engine's marks it dirty first): killed
// after, it leaves a sidecar that is dirty or stale, never clean, and the
// next run rebuilds it.
package writers
