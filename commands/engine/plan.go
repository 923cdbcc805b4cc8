package engine

import (
	"fmt"

	"pisess/readers"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/upgrade"
	"pisess/writers/wire"
)

// The plan of one session, from discovery, the sidecar's status (or the
// fresh cache's word) and the options (caches.go asks the refusal cache).

// plan is what migrate intends for one session, and why.
type plan struct {
	action PlanAction
	reason string
	notes  []string
	// class is the sidecar's status class when one exists.
	class verify.Class
	// refusal is the planned refusal of a header version other than 3.
	refusal *readers.RefusedError
	// failure, when set, is the session's failure found while planning
	// (its status could not be taken): nothing is read or written.
	failure *ErrorInfo
	// heal: the refresh rebuilds a damaged sidecar, quarantining it.
	heal bool
	// busy: the session's lock is held with staging beside it (pi
	// rebuilding its sidecar): nothing is done, the result is busy.
	busy bool
}

const sqliteNote = "pi's resume reads sidecars of JSONL sessions only: this sidecar is for pisess and future readers"

// planSession decides a session's action from discovery and the
// sidecar's status, as deep as pi's open of it (verify.StatusOpen), or the
// tree's fresh cache (nil: none) where it vouches for the sidecar.
func planSession(s discover.Session, force bool, fc *verify.FreshCache) plan {
	var p plan
	if s.Format == readers.FormatSQLitev1 {
		p.notes = append(p.notes, sqliteNote)
	}
	switch {
	case s.Refusal != nil:
		p.action, p.reason = PlanRefuse, s.Refusal.Reason
		return p
	case s.ReadError != nil:
		return unreadHeader(s, p, s.ReadError)
	case s.Format == readers.FormatJSONLv3 && s.Version != 3:
		r := upgrade.LegacyRefusal(s.Path, s.Version)
		if r.Transient() {
			return unreadHeader(s, p, r)
		}
		p.action, p.refusal, p.reason = PlanRefuse, r, r.Reason
		return p
	case s.SidecarIsSymlink:
		p.action, p.reason = PlanNeedsRepair, "the sidecar is a symlink: pi can never open it; fsck --repair quarantines it"
		if force {
			p.action, p.reason = PlanRefresh, "the sidecar is a symlink; rebuilt from the source (--force)"
		}
		return p
	}
	leftovers := len(s.Staging) + len(s.Backups)
	if leftovers > 0 && !force {
		// The reference stages its own rebuild of a sidecar under the
		// same names, holding the session lock: staging beside a held
		// lock belongs to a live writer, never leftovers (issue 34 §1).
		if held, err := durable.OS.LockHeld(s.Lock); err == nil && held {
			p.action, p.busy = PlanSkip, true
			p.reason = fmt.Sprintf("%s is held and %d staging/backup director(ies) are beside the session: pi is writing its sidecar; the next run looks again", s.Lock, leftovers)
			return p
		}
	}
	if leftovers > 0 {
		// An interrupted run left these: fsck --repair decides whether a
		// backup goes back or to the quarantine. Building over them would
		// hide them (issue 7: leftovers mean needs repair).
		if !force {
			p.action = PlanNeedsRepair
			p.reason = fmt.Sprintf("%d leftover staging/backup director(ies) of an interrupted run: pisess fsck --repair restores or quarantines them (or --force rebuilds from the source)", leftovers)
			return p
		}
		p.notes = append(p.notes, fmt.Sprintf("%d leftover staging/backup director(ies) left for pisess fsck --repair", leftovers))
	}
	if s.Sidecar == "" {
		p.action, p.reason = PlanMigrate, "no sidecar"
		return p
	}
	st, err := fc.Status(s)
	if err != nil {
		// A status that cannot be taken (an lstat or open that failed)
		// says nothing about the sidecar: a failure of this run, tried
		// again by the next, never advice to repair (issue 32 §2).
		p.action, p.reason = PlanRefresh, "the sidecar's status could not be read"
		p.failure = &ErrorInfo{Class: string(wire.ErrorClassIOFailure), Message: "status: " + err.Error()}
		if force {
			p.reason, p.failure = "status could not be read; rebuilt from the source (--force)", nil
		}
		return p
	}
	return planByStatus(p, st, force)
}

// planByStatus plans a session from its sidecar's status class: skip a
// fresh one, refresh a stale one, heal the damage a rebuild from the
// source mends, leave the rest to fsck --repair (or, with force, rebuild
// whatever it is).
func planByStatus(p plan, st verify.StatusReport, force bool) plan {
	p.class = st.Class
	first := ""
	if len(st.Findings) > 0 {
		first = ": " + st.Findings[0].Detail
	}
	switch st.Class {
	case verify.ClassMigrated:
		p.action, p.reason = PlanSkip, "the sidecar is fresh"
		if len(st.Findings) > 0 {
			// Fresh, and pi opens it, but broken where pi's next change
			// to it would fail (a mutation lock or ledger of the wrong
			// type, an empty ledger): not a sidecar to skip.
			p.action, p.reason = PlanNeedsRepair, "the sidecar is fresh"+first+": pisess fsck --repair rebuilds it"
		}
		if force {
			p.action, p.reason = PlanRefresh, "the sidecar is fresh; rebuilt anyway (--force)"
		}
	case verify.ClassStale:
		p.action, p.reason = PlanRefresh, "the sidecar is stale (the session changed since it was built)"
		if st.Freshness != nil && st.Freshness.Reason != "" {
			p.reason = "the sidecar is stale: " + st.Freshness.Reason
		}
	case verify.ClassUnmigrated:
		p.action, p.reason = PlanMigrate, "no sidecar"
	case verify.ClassCorrupt:
		if verify.OnlySourceStateInvalid(st.Findings) {
			// pi's resume reads an invalid source-state.json as stale
			// (FORMAT.md §8), and the Rust pi rewrites it in place under
			// the session lock, which this plan does not hold: caught
			// mid-write, it is empty. A refresh rebuilds it from the
			// source, as the finding's repair says.
			p.action, p.reason = PlanRefresh, "the sidecar is stale"+first
			break
		}
		fallthrough
	default: // corrupt, partial
		switch {
		case force:
			p.action, p.reason = PlanRefresh, fmt.Sprintf("the sidecar is %s%s; rebuilt from the source (--force)", st.Class, first)
		case verify.Rebuildable(st.Findings):
			// Damage a rebuild from the source mends (issue 34 §2): the
			// run heals it as it heals a killed run's leftovers, and
			// keeps the damaged sidecar in its quarantine (plan.class
			// tells the discarder so).
			p.action, p.heal = PlanRefresh, true
			p.reason = fmt.Sprintf("the sidecar is %s%s: rebuilt from the source, the damaged one kept in the quarantine", st.Class, first)
			p.notes = append(p.notes, "a repair: what pisess fsck --repair does for this sidecar, done by this run")
		default:
			p.action, p.reason = PlanNeedsRepair, fmt.Sprintf("the sidecar is %s%s: pisess fsck --repair repairs it", st.Class, first)
		}
	}
	return p
}

// unreadHeader plans a session whose header could not be read (EACCES,
// EMFILE, EIO: a readers.Class.Transient error): its version is unknown,
// so no refusal can be read from it, and nothing is known of its sidecar's
// freshness. It is a failure of this run, counted, and read again by the
// next (issue 32 §2), never a refusal.
func unreadHeader(s discover.Session, p plan, r *readers.RefusedError) plan {
	p.action, p.reason = PlanMigrate, "its header could not be read"
	if s.Sidecar != "" {
		p.action = PlanRefresh
	}
	p.failure = &ErrorInfo{Class: string(wire.ErrorClassIOFailure), Message: r.Error(), Line: r.Line}
	return p
}

// planned is the result of a session before anything is done.
func planned(s discover.Session, p plan) SessionResult {
	return SessionResult{Path: s.Path, SourceFormat: string(s.Format), Action: p.action, Class: p.class, Reason: p.reason,
		SourceBytes: s.Size, Notes: p.notes, Sidecar: discover.SidecarPath(s.Path), heal: p.heal}
}

// runs reports whether a session planned so is read or written: its plan
// is not its result (decided).
func (p plan) runs() bool {
	switch p.action {
	case PlanSkip, PlanNeedsRepair, PlanRefuse:
		return false
	}
	return p.failure == nil
}

// decided returns the result of a session whose plan is its result (skip,
// needs repair, refuse): nothing of it is read or written.
func decided(s discover.Session, p plan) (SessionResult, bool) {
	if p.runs() {
		return SessionResult{}, false
	}
	res := planned(s, p)
	switch {
	case p.failure != nil:
		res.Outcome, res.Error = OutcomeFailed, p.failure
		return res, true
	}
	switch p.action {
	case PlanSkip:
		res.Outcome = OutcomeSkipped
		if p.busy {
			res.Outcome, res.Error = OutcomeBusy, &ErrorInfo{Class: "busy", Message: p.reason}
		}
	case PlanNeedsRepair:
		res.Outcome = OutcomeLeft
	case PlanRefuse:
		res.Outcome = OutcomeRefused
		r := s.Refusal
		if r == nil {
			r = p.refusal
		}
		res.Error = refusedInfo(r, p.reason)
	}
	return res, true
}
