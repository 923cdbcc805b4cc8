package verify

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"

	"pisess/readers"
	"pisess/readers/discover"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// Verdict is one sidecar checked against its source in full, as `pisess
// verify` reports it (Sidecar).
type Verdict struct {
	Path         string `json:"path"`
	Sidecar      string `json:"sidecar"`
	SourceFormat string `json:"sourceFormat"`
	// Verified: the three flags are true, every invariant holds and every
	// acceptance rule is met.
	Verified bool `json:"verified"`
	// Skipped: a session without a sidecar found while walking a tree:
	// nothing to verify, not a failure.
	Skipped      bool               `json:"skipped,omitempty"`
	Verification wire.Verification  `json:"-"`
	Flags        VerdictFlags       `json:"verification"`
	Invariants   []VerdictInvariant `json:"invariants"`
	// Acceptance lists the findings of FORMAT.md §11's rules (codes
	// acceptance.*); Findings every finding, those included.
	Acceptance []VerdictFinding `json:"acceptance"`
	Findings   []VerdictFinding `json:"findings"`
	// Fresh is the source-state verdict (informational: a stale sidecar
	// that still equals its source verifies).
	Fresh bool `json:"fresh"`
	// Stale: the store is whole but pi has written the session since; pi
	// will not use the sidecar until it is refreshed. Not a failure.
	Stale         bool   `json:"stale,omitempty"`
	Entries       uint64 `json:"entries"`
	SourceEntries uint64 `json:"sourceEntries"`
	Error         string `json:"error,omitempty"`
}

// VerdictInvariant is one of INV-001..INV-007 in a Verdict.
type VerdictInvariant struct {
	Code   string `json:"code"`
	Holds  bool   `json:"holds"`
	Detail string `json:"detail,omitempty"`
}

// VerdictFinding is one thing a Verdict found.
type VerdictFinding struct {
	Code    string `json:"code"`
	Path    string `json:"path"`
	Segment uint64 `json:"segment,omitempty"`
	Offset  int64  `json:"offset,omitempty"`
	Line    int64  `json:"line,omitempty"`
	Detail  string `json:"detail"`
	Repair  string `json:"repair,omitempty"`
}

// VerdictFlags are the reference's three verification flags, for --json.
type VerdictFlags struct {
	EntryCountMatch bool `json:"entryCountMatch"`
	HashChainMatch  bool `json:"hashChainMatch"`
	IndexConsistent bool `json:"indexConsistent"`
}

// Sidecar verifies the sidecar of s against its source in full
// (AgainstSource, Acceptance as the session's owner, Freshness, and
// Status for a sidecar that is only stale). A session without a sidecar
// fails when named (given on the command line), and is skipped when met
// while walking a tree.
func Sidecar(ctx context.Context, s discover.Session, named bool) Verdict {
	v := Verdict{Path: s.Path, Sidecar: discover.SidecarPath(s.Path), SourceFormat: string(s.Format),
		Invariants: []VerdictInvariant{}, Acceptance: []VerdictFinding{}, Findings: []VerdictFinding{}}
	if _, err := os.Lstat(v.Sidecar); errors.Is(err, fs.ErrNotExist) {
		v.Skipped = !named
		v.Error = "no sidecar to verify"
		return v
	}
	if s.Refusal != nil {
		v.Error = s.Refusal.Error()
		return v
	}
	src, err := s.Open()
	if err != nil {
		v.Error = err.Error()
		if r := readers.AsRefused(err); r != nil {
			v.addFinding(Finding{Code: SourceCode(string(r.Class)), Path: r.Path, Line: r.Line,
				Detail: r.Reason, Repair: RepairSource})
		}
		return v
	}
	defer src.Close()
	opt := Options{SourcePath: s.Path, SourceFormat: s.Format}
	if uid, gid, err := durable.OS.Owner(s.Path); err == nil {
		opt.Accept = &AcceptOptions{OwnerUID: uid, OwnerGID: gid}
	}
	r, err := AgainstSource(ctx, src, v.Sidecar, opt)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Verification = r.Verification
	v.Flags = VerdictFlags{r.Verification.EntryCountMatch, r.Verification.HashChainMatch, r.Verification.IndexConsistent}
	v.Entries, v.SourceEntries = r.Entries, r.SourceEntries
	for _, code := range InvariantCodes {
		inv := r.Invariants[code]
		vi := VerdictInvariant{Code: code, Holds: inv.Holds}
		if inv.Finding != nil {
			vi.Detail = inv.Finding.String()
		}
		v.Invariants = append(v.Invariants, vi)
	}
	for _, f := range r.Findings {
		v.addFinding(f)
	}
	fresh := false
	if fr, err := Freshness(s.Path, v.Sidecar); err == nil {
		fresh = fr.Fresh
	}
	v.Verified = r.Verified() && len(r.Findings) == 0
	// Fresh is pi's verdict on a sidecar it can use: one that fails
	// verification is not, whatever its source state says (issue 34 §3).
	v.Fresh = fresh && v.Verified
	if !v.Verified && !fresh {
		// A sidecar that no longer matches a source pi has written since
		// is stale, not damaged, when the store itself is whole: pi reads
		// the source until a refresh (FORMAT.md §8).
		if st, err := Status(s.Path); err == nil && st.Class == ClassStale {
			v.Stale = true
		}
	}
	return v
}

func (v *Verdict) addFinding(f Finding) {
	vf := VerdictFinding{Code: f.Code, Path: f.Path, Segment: f.Segment, Offset: f.Offset, Line: f.Line, Detail: f.Detail, Repair: f.Repair}
	v.Findings = append(v.Findings, vf)
	if strings.HasPrefix(f.Code, "acceptance.") {
		v.Acceptance = append(v.Acceptance, vf)
	}
}
