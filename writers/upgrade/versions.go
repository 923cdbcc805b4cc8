package upgrade

import (
	"fmt"

	"pisess/readers"
	"pisess/readers/jsonl"
)

// QuarantineKind names the quarantine copy of an upgraded session's
// original: <tree>/.pisess/quarantine/<id>/<rel>.pre-upgrade
// (ledger.QuarantinePath).
const QuarantineKind = "pre-upgrade"

// PiVersion is the header version pi gives a JSONL session (the last
// "version" member, `version ?? 1`; NewerVersion above 3), read from the
// first line only (Sniff): what decides whether pi, and so the upgrade,
// rewrites the file. The reference's stricter reading (discovery's) does
// not: a header pi reads as version 3 is never pi's to rewrite.
type PiVersion struct {
	V   int
	Err error
}

// SniffVersion is Sniff's answer for the file at path.
func SniffVersion(path string) PiVersion {
	v, err := Sniff(path)
	return PiVersion{v, err}
}

// Legacy reports whether pi reads the file as version 1 or 2: one that
// Upgrade must open (and so lock) and rewrite.
func (pv PiVersion) Legacy() bool { return pv.Err == nil && (pv.V == 1 || pv.V == 2) }

// Settled returns the result of a session whose upgrade needs no opening
// (ok): not a JSONL session (skipped), a header pi cannot read (refused),
// version 3 (current) or newer (skipped: not a legacy file). A legacy
// file is Upgrade's (ok false).
func Settled(path string, format readers.SourceFormat, pv PiVersion) (res *Result, ok bool) {
	res = &Result{Path: path}
	switch {
	case format != readers.FormatJSONLv3:
		res.Status = StatusSkipped
		res.Problem = &Problem{Class: "not_jsonl", Reason: fmt.Sprintf("a %s session: only JSONL sessions have versions to upgrade", format)}
	case pv.Err != nil:
		res.Status = StatusRefused
		res.Problem = &Problem{Class: readers.ClassBadHeader, Reason: pv.Err.Error()}
		if r := readers.AsRefused(pv.Err); r != nil {
			res.Problem = &Problem{Line: r.Line, Class: r.Class, Reason: r.Reason}
		}
	case pv.V == 3:
		res.Status, res.Version = StatusCurrent, 3
	case pv.V == NewerVersion:
		res.Status, res.Version, res.Problem = StatusSkipped, pv.V, NotLegacy()
	default:
		return nil, false
	}
	return res, true
}

// LegacyRefusal says why the reference will not migrate the JSONL session
// at path, whose header (discovery's reading) is version (0: none) and not
// a plain version 3, or returns the transient error that kept it from
// reading the header; and whether `pisess upgrade` can help: only when pi
// itself reads the file as version 1 or 2 (pi's rule: the last "version"
// member, `version ?? 1`, below 3) does pi rewrite it, and so can the
// upgrade. The reason is the reference's own (a duplicate member, a
// version it does not know), not a guess from the first member.
func LegacyRefusal(path string, version int) *readers.RefusedError {
	class, reason := readers.ClassUnsupportedVer, fmt.Sprintf("header version %d: the reference migrates version 3 only", version)
	if version == 0 {
		reason = "no header version (a version 1 file): the reference migrates version 3 only"
	}
	if _, _, err := jsonl.Sniff(path); err != nil {
		if r := readers.AsRefused(err); r != nil {
			if r.Transient() {
				return r // no verdict: the header could not be read now
			}
			class, reason = r.Class, r.Reason
		}
	}
	switch v, err := Sniff(path); {
	case err != nil:
		reason += "; pi cannot read its header either (" + err.Error() + ")"
	case v == 1 || v == 2:
		reason += fmt.Sprintf("; pi reads it as version %d and rewrites it as version 3 when it opens it: `pisess upgrade %s` does the same now", v, path)
	default:
		reason += "; pi reads it as a current file and never rewrites it, so `pisess upgrade` cannot help: only a new session (or an edit of the header) can"
	}
	return &readers.RefusedError{Path: path, Line: 1, Class: class, Reason: reason}
}
