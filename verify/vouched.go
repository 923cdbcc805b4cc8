package verify

import (
	"pisess/readers"
	"pisess/writers/durable"
)

// Vouched is what a caller knows of a sidecar that a StatusFast found
// nothing wrong with, and whose every file and directory is unchanged
// since (its metadata equal, read no sooner than a change would show; the
// fresh cache of commands/engine): the session's header id, owner and the
// manifest's counters that status saw. Only the session file may have
// changed.
type Vouched struct {
	HeaderID           string
	OwnerUID, OwnerGID uint32
	Entries, Bytes     uint64
	// ReadID and ReadVersion, when ReadID is set, are the JSONL session's
	// header as the caller read it moments before (discover's walk sniffs
	// each session file that changed since the fresh cache saw it):
	// StatusVouched does not read it a second time.
	ReadID      string
	ReadVersion int
}

// StatusVouched is StatusFast for a session whose sidecar is vouched for
// (v) and whose path has no symlinked directory (the caller's discovery
// says so): what StatusFast would find in the sidecar it found before, so
// only the session file is read — its header, which must still carry
// v's id, and its freshness against the sidecar's source state. ok is
// false when that cannot stand in for StatusFast (a header that does not
// read or names another session, another owner, a freshness that needs a
// full verification): the caller asks StatusFast.
func StatusVouched(sessionPath string, v Vouched) (rep StatusReport, ok bool) {
	rep, done, err := begin(sessionPath)
	if done || err != nil {
		return StatusReport{}, false
	}
	out := findings{session: rep.Session}
	var id string
	if v.ReadID != "" {
		id = noteHeader(&out, &rep, readers.Header{Format: readers.FormatJSONLv3, ID: v.ReadID, Version: v.ReadVersion})
	} else {
		id = header(&out, &rep)
	}
	if id == "" || id != v.HeaderID || len(out.list) > 0 {
		return StatusReport{}, false
	}
	if uid, gid, err := durable.OS.Owner(rep.Session); err != nil || uint32(uid) != v.OwnerUID || uint32(gid) != v.OwnerGID {
		// The sidecar's files must be the session's owner's: judged again.
		return StatusReport{}, false
	}
	rep.Entries, rep.Bytes = v.Entries, v.Bytes
	fr, ok := freshness(&out, rep.Session, rep.Sidecar)
	if !ok || fr.NeedsFullVerify {
		return StatusReport{}, false
	}
	rep.Freshness = &fr
	freshnessFinding(&out, fr, rep.Sidecar)
	rep.Findings = out.list
	rep.Class = classify(rep.Findings)
	return rep, true
}
