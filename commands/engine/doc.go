// Package engine holds one function per pisess command (Inspect, Build, and
// the lead's Migrate, Fsck, Rollback, Status, Verify): it takes the locks,
// runs the batch, and returns a typed report. It never prints: package
// commands renders every report as text or --json and maps (report, error)
// to the exit code.
//
// Errors an engine function returns mean "could not run"; problems found in
// a store or a source are values in the report. Two errors are typed so that
// the exit code can tell them apart: *UsageError (the options are wrong) and
// IsTreeLocked (another run holds the tree lock). A source the reference
// model refuses arrives as a *readers.RefusedError in the chain (AsRefused).
package engine
