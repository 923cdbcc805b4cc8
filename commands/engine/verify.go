package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"pisess/readers"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Paths are session files, their <stem>.v2 sidecars, or trees (every
	// session with a sidecar in them). At least one is required.
	Paths []string
}

// VerifyInvariant is one of INV-001..INV-007 in a verify report.
type VerifyInvariant struct {
	Code   string `json:"code"`
	Holds  bool   `json:"holds"`
	Detail string `json:"detail,omitempty"`
}

// VerifyFinding is one thing verify found.
type VerifyFinding struct {
	Code    string `json:"code"`
	Path    string `json:"path"`
	Segment uint64 `json:"segment,omitempty"`
	Offset  int64  `json:"offset,omitempty"`
	Line    int64  `json:"line,omitempty"`
	Detail  string `json:"detail"`
	Repair  string `json:"repair,omitempty"`
}

// VerifySession is one sidecar checked against its source.
type VerifySession struct {
	Path         string `json:"path"`
	Sidecar      string `json:"sidecar"`
	SourceFormat string `json:"sourceFormat"`
	// Verified: the three flags are true, every invariant holds and every
	// acceptance rule is met.
	Verified bool `json:"verified"`
	// Skipped: a session without a sidecar found while walking a tree:
	// nothing to verify, not a failure.
	Skipped      bool              `json:"skipped,omitempty"`
	Verification wire.Verification `json:"-"`
	Flags        VerifyFlags       `json:"verification"`
	Invariants   []VerifyInvariant `json:"invariants"`
	// Acceptance lists the findings of FORMAT.md §11's rules (codes
	// acceptance.*); Findings every finding, those included.
	Acceptance []VerifyFinding `json:"acceptance"`
	Findings   []VerifyFinding `json:"findings"`
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

// VerifyFlags are the reference's three verification flags, for --json.
type VerifyFlags struct {
	EntryCountMatch bool `json:"entryCountMatch"`
	HashChainMatch  bool `json:"hashChainMatch"`
	IndexConsistent bool `json:"indexConsistent"`
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Sessions []VerifySession `json:"sessions"`
	Verified int             `json:"verified"`
	Failed   int             `json:"failed"`
	Stale    int             `json:"stale"`
	// Skipped are entries that are not sessions, named or found: notices,
	// as in every command.
	Skipped []discover.Skipped `json:"skippedEntries"`
	Trees   []string           `json:"trees"`
}

// Tally counts every session that did not verify as a problem left.
func (r VerifyReport) Tally() Tally { return Tally{Problems: r.Failed} }

// Verify checks each sidecar against its source in full (FORMAT.md §9,
// §11): the three verification flags (entry ids in order, the hash chain
// recomputed from the source, index ↔ frames ↔ manifest), every invariant
// INV-001..INV-007, and pi's acceptance rules (types, private modes, the
// session owner, no symlink, no pending rollback). It never writes and
// never locks. A session named directly that has no sidecar fails; one
// met while walking a tree is skipped. An error means verify could not
// run (no path, a path that does not exist).
func Verify(ctx context.Context, opt VerifyOptions) (VerifyReport, error) {
	if len(opt.Paths) == 0 {
		return VerifyReport{}, Usagef("verify wants at least one PATH: a session file, its <stem>.v2 sidecar, or a tree")
	}
	named := map[string]bool{}
	var roots []string
	for _, p := range opt.Paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return VerifyReport{}, fmt.Errorf("verify: %w", err)
		}
		if src, ok := sessionOfSidecar(abs); ok {
			abs = src
		}
		if fi, err := os.Lstat(abs); err == nil && !fi.IsDir() {
			named[abs] = true
		}
		roots = append(roots, abs)
	}
	trees, err := discover.Walk(roots)
	if err != nil {
		return VerifyReport{}, fmt.Errorf("verify: %w", err)
	}
	rep := VerifyReport{Sessions: []VerifySession{}, Skipped: []discover.Skipped{}, Trees: []string{}}
	for _, t := range trees {
		for _, s := range t.Sessions {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			v := verifySession(ctx, s, named[s.Path])
			switch {
			case v.Skipped:
			case v.Verified:
				rep.Verified++
			case v.Stale:
				rep.Stale++
			default:
				rep.Failed++
			}
			rep.Sessions = append(rep.Sessions, v)
		}
		rep.Skipped = append(rep.Skipped, t.Skipped...)
		rep.Trees = append(rep.Trees, t.Root)
	}
	return rep, nil
}

// sessionOfSidecar maps <stem>.v2 to its session file (<stem>.jsonl, else
// <stem>.sqlite).
func sessionOfSidecar(path string) (string, bool) {
	stem, ok := strings.CutSuffix(filepath.Clean(path), discover.SidecarSuffix)
	if !ok {
		return "", false
	}
	for _, ext := range []string{discover.ExtJSONL, discover.ExtSQLite} {
		if _, err := os.Lstat(stem + ext); err == nil {
			return stem + ext, true
		}
	}
	return "", false
}

// verifySession verifies one session's sidecar.
func verifySession(ctx context.Context, s discover.Session, named bool) VerifySession {
	v := VerifySession{Path: s.Path, Sidecar: discover.SidecarPath(s.Path), SourceFormat: string(s.Format),
		Invariants: []VerifyInvariant{}, Acceptance: []VerifyFinding{}, Findings: []VerifyFinding{}}
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
			v.addFinding(verify.Finding{Code: verify.SourceCode(string(r.Class)), Path: r.Path, Line: r.Line,
				Detail: r.Reason, Repair: verify.RepairSource})
		}
		return v
	}
	defer src.Close()
	opt := verify.Options{SourcePath: s.Path, SourceFormat: s.Format}
	if uid, gid, err := durable.OS.Owner(s.Path); err == nil {
		opt.Accept = &verify.AcceptOptions{OwnerUID: uid, OwnerGID: gid}
	}
	r, err := verify.AgainstSource(ctx, src, v.Sidecar, opt)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Verification = r.Verification
	v.Flags = VerifyFlags{r.Verification.EntryCountMatch, r.Verification.HashChainMatch, r.Verification.IndexConsistent}
	v.Entries, v.SourceEntries = r.Entries, r.SourceEntries
	for _, code := range verify.InvariantCodes {
		inv := r.Invariants[code]
		vi := VerifyInvariant{Code: code, Holds: inv.Holds}
		if inv.Finding != nil {
			vi.Detail = inv.Finding.String()
		}
		v.Invariants = append(v.Invariants, vi)
	}
	for _, f := range r.Findings {
		v.addFinding(f)
	}
	fresh := false
	if fr, err := verify.Freshness(s.Path, v.Sidecar); err == nil {
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
		if st, err := verify.Status(s.Path); err == nil && st.Class == verify.ClassStale {
			v.Stale = true
		}
	}
	return v
}

func (v *VerifySession) addFinding(f verify.Finding) {
	vf := VerifyFinding{Code: f.Code, Path: f.Path, Segment: f.Segment, Offset: f.Offset, Line: f.Line, Detail: f.Detail, Repair: f.Repair}
	v.Findings = append(v.Findings, vf)
	if strings.HasPrefix(f.Code, "acceptance.") {
		v.Acceptance = append(v.Acceptance, vf)
	}
}
