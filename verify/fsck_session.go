package verify

import (
	"context"
	"errors"
	"fmt"
	"io"

	"pisess/readers"
	"pisess/readers/discover"
	"pisess/writers/durable"
)

// CodeUnchecked is the finding of a session fsck could not check at all
// (its status could not be computed: an I/O error, not a finding).
const CodeUnchecked = "fsck.unchecked"

// HasProblems reports whether --repair has work: a problem left, or a
// stale sidecar (a notice that a refresh mends).
func HasProblems(fs []FsckFinding) bool {
	for _, f := range fs {
		if !f.Repaired && (!f.Notice || f.Action == ActionRefresh) {
			return true
		}
	}
	return false
}

// CheckSession is fsck's read-only examination of one session: the
// reference's class (Status: acceptance, full store integrity,
// freshness), a full verification against the source for a sidecar the
// reference would call migrated, the source's own refusal for a session
// without one, and the staging and backup directories an interrupted run
// left beside it. ops reads the session file's owner.
func CheckSession(ctx context.Context, ops durable.Ops, s discover.Session) (Class, []FsckFinding) {
	return fsckCheck{ops}.check(ctx, s)
}

// fsckCheck is one fsck's checks of its sessions.
type fsckCheck struct{ ops durable.Ops }

func (c fsckCheck) check(ctx context.Context, s discover.Session) (Class, []FsckFinding) {
	var out []FsckFinding
	seen := map[string]bool{}
	add := func(f FsckFinding) {
		if f.Session == "" {
			f.Session = s.Path
		}
		if !seen[f.Key()] {
			seen[f.Key()] = true
			out = append(out, f)
		}
	}
	if s.Refusal != nil {
		add(refusalFinding(s.Refusal))
	}
	if s.ReadError != nil {
		// Discovery could not read the header: a problem of this run,
		// never "not a session" nor a refusal (issue 32 §2, §3).
		add(sourceErrorFinding(s.Path, s.ReadError))
	}
	class := ClassUnmigrated
	if s.Refusal == nil || s.Refusal.Class == discover.ClassSymlinkAncestor {
		rep, err := Status(s.Path)
		if err != nil {
			add(FsckFinding{Code: CodeUnchecked, Path: s.Path, Detail: err.Error(), Action: ActionNone,
				Repair: "cannot repair: fsck could not examine the session; fix the cause and run fsck again"})
			return ClassCorrupt, out
		}
		class = rep.Class
		for _, f := range rep.Findings {
			add(fromVerify(f))
		}
		switch class {
		case ClassUnmigrated:
			if f := c.sourceRefusal(ctx, s); f != nil {
				add(*f)
			}
		case ClassMigrated:
			for _, f := range c.againstSource(ctx, s) {
				add(f)
			}
		}
	}
	for _, f := range leftoverFindings(s, class != ClassUnmigrated) {
		add(f)
	}
	return class, out
}

// refusalFinding reports what discovery refused, as a notice: pi keeps
// using such a session and pisess leaves it alone. A symlinked session
// file (pi uses the sidecar beside its target, not beside the link) and a
// .sqlite whose .jsonl twin owns <stem>.v2 have no sidecar of their own
// (class unmigrated); under a symlinked ancestor, Status also
// reports the sidecar pi can never open, as a problem nothing can repair.
func refusalFinding(r *readers.RefusedError) FsckFinding {
	f := FsckFinding{Code: SourceCode(string(r.Class)), Path: r.Path, Line: r.Line, Detail: r.Reason,
		Action: ActionNone, Repair: RepairSource, Notice: true}
	if r.Class == discover.ClassSymlinkAncestor {
		f.Code = CodeSymlinkAncestor
		f.Repair = "cannot repair: pi opens sidecars with no symlink in any path component; " +
			"move the tree to a real directory (or point PI_SESSIONS_DIR at one) and run pisess migrate there"
	}
	return f
}

// sourceRefusal reads a session that has no sidecar to its end and
// reports the reader's refusal, if any, as a notice: pi keeps using such
// a session as JSONL, and pisess migrate would refuse it for this reason.
func (c fsckCheck) sourceRefusal(ctx context.Context, s discover.Session) *FsckFinding {
	if r := stagingNameRefusal(s.Path); r != nil {
		f := sourceErrorFinding(s.Path, r)
		return &f
	}
	src, err := s.Open()
	if err == nil {
		defer src.Close()
		for seq := uint64(1); err == nil; seq++ {
			if err = ctx.Err(); err != nil {
				return nil
			}
			var e readers.Entry
			if e, err = src.Next(); err == nil {
				if r := frameRefusal(s.Path, e, seq); r != nil {
					err = r
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
	f := sourceErrorFinding(s.Path, err)
	return &f
}

// sourceErrorFinding reports an error met reading a session's source: the
// reference's refusal as a notice (pi keeps using such a session as
// JSONL), any other error — an I/O error, a resource limit, a lock
// (readers.Class.Transient), an error that is no refusal at all — as a
// problem that nothing but its cause's end mends (issue 32 §2).
func sourceErrorFinding(path string, err error) FsckFinding {
	if r := readers.AsVerdict(err); r != nil {
		return FsckFinding{Code: SourceCode(string(r.Class)), Path: r.Path, Line: r.Line, Detail: r.Reason,
			Action: ActionNone, Repair: RepairSource, Notice: true}
	}
	f := FsckFinding{Code: CodeUnchecked, Path: path, Detail: err.Error(), Action: ActionNone, Repair: RepairUnreadable}
	if r := readers.AsRefused(err); r != nil {
		f.Code, f.Path, f.Line, f.Detail = SourceCode(string(r.Class)), r.Path, r.Line, r.Reason
	}
	return f
}

// againstSource verifies a sidecar the reference calls migrated against
// its whole source: fsck is the full check, and a store that pi would
// accept but that no longer holds the source's entries (a shortened one
// with a fresh fingerprint) must not pass it.
func (c fsckCheck) againstSource(ctx context.Context, s discover.Session) []FsckFinding {
	src, err := s.Open()
	if err != nil {
		return []FsckFinding{sourceErrorFinding(s.Path, err)}
	}
	defer src.Close()
	opt := Options{SourcePath: s.Path}
	if uid, gid, err := c.ops.Owner(s.Path); err == nil {
		opt.Accept = &AcceptOptions{OwnerUID: uid, OwnerGID: gid}
	}
	sidecar := discover.SidecarPath(s.Path)
	rep, err := AgainstSource(ctx, src, sidecar, opt)
	if err != nil {
		return []FsckFinding{{Code: CodeUnchecked, Path: sidecar, Detail: err.Error(), Action: ActionNone,
			Repair: "cannot repair: fsck could not verify the sidecar; fix the cause and run fsck again"}}
	}
	if rep.Verified() {
		return nil
	}
	var out []FsckFinding
	for _, f := range rep.Findings {
		ff := fromVerify(f)
		if ff.Class == "" {
			ff.Class = string(ClassCorrupt)
		}
		out = append(out, ff)
	}
	if len(out) == 0 {
		out = append(out, FsckFinding{Code: CodeEntriesSource, Class: string(ClassCorrupt), Path: sidecar,
			Detail: fmt.Sprintf("the sidecar does not verify against its source (%+v)", rep.Verification),
			Action: ActionRebuild, Repair: repairRebuild})
	}
	return out
}

// leftoverFindings reports the staging and backup directories beside a
// session. A backup is restored when no sidecar is installed (after it is
// verified); otherwise it, like a staging directory, goes to quarantine.
func leftoverFindings(s discover.Session, sidecarInstalled bool) []FsckFinding {
	var out []FsckFinding
	for _, p := range s.Staging {
		out = append(out, FsckFinding{Code: CodeTreeStaging, Session: s.Path, Path: p,
			Detail: "a staging directory left by an interrupted migration", Action: ActionQuarantine, Repair: repairQuarantine})
	}
	for i, p := range s.Backups {
		f := FsckFinding{Code: CodeTreeBackup, Session: s.Path, Path: p,
			Detail: "a displaced sidecar left by an interrupted cutover", Action: ActionQuarantine, Repair: repairQuarantine}
		if !sidecarInstalled && i == len(s.Backups)-1 {
			f.Detail += " while no sidecar is installed"
			f.Action, f.Repair = ActionRestoreBackup, repairRestoreBackup
		}
		out = append(out, f)
	}
	return out
}
