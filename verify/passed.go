package verify

import (
	"context"
	"errors"
	"fmt"

	"pisess/readers"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// Passed is the proof that a staging store passed every check against its
// source: only Verified makes one (its fields are unexported, and its zero
// value is not Valid), so code that requires a Passed — rollback.Cutover —
// cannot install an unverified store.
type Passed struct {
	staging     string
	session     string
	fingerprint wire.SourceFingerprint
	report      wire.Verification
	ok          bool
}

// Valid reports whether p came from a successful Verified.
func (p Passed) Valid() bool { return p.ok }

// StagingDir is the verified staging store.
func (p Passed) StagingDir() string { return p.staging }

// SessionPath is the session file it was verified against.
func (p Passed) SessionPath() string { return p.session }

// Fingerprint is the source's fingerprint, the same before the source was
// read and after the verification: what the clean source-state.json of the
// installed sidecar records.
func (p Passed) Fingerprint() wire.SourceFingerprint {
	fp := p.fingerprint
	if fp.FileIdentity != nil {
		id := *fp.FileIdentity
		fp.FileIdentity = &id
	}
	return fp
}

// Verification is the three flags, all true.
func (p Passed) Verification() wire.Verification { return p.report }

// ErrNotVerified is matched by the error of a Verified that found
// problems: the report says which.
var ErrNotVerified = errors.New("staging store not verified")

// Verified checks the staging store stagingDir, built from src, before it
// is cut over into sessionPath's sidecar: AgainstSource (all three flags,
// every invariant), Acceptance (every §11 rule, ownership included: by
// default the session file's owner), and that the source's fingerprint,
// taken before the source was read (opt.Fingerprint, required), is the
// same after. It returns a valid Passed only when the report has no
// finding at all; otherwise the error matches ErrNotVerified and the
// report says why. Other errors mean the check could not be made.
func Verified(ctx context.Context, src readers.Source, stagingDir, sessionPath string, opt Options) (Passed, Report, error) {
	if opt.Fingerprint == nil {
		return Passed{}, Report{}, errors.New("verify: Verified needs the fingerprint taken before the source was read")
	}
	opt.SourcePath, opt.Staging = sessionPath, true
	if opt.Accept == nil {
		uid, gid, err := durable.OS.Owner(sessionPath)
		if err != nil {
			return Passed{}, Report{}, fmt.Errorf("verify: owner of %s: %w", sessionPath, err)
		}
		opt.Accept = &AcceptOptions{OwnerUID: uid, OwnerGID: gid}
	}
	rep, err := AgainstSource(ctx, src, stagingDir, opt)
	if err != nil {
		return Passed{}, rep, err
	}
	after, err := Fingerprint(sessionPath)
	switch {
	case errors.Is(err, ErrSourceChanged):
		rep.Findings = append(rep.Findings, changed(sessionPath, "the source changed while it was hashed after the verification"))
	case err != nil:
		return Passed{}, rep, fmt.Errorf("verify: %w", err)
	case !sameSource(*opt.Fingerprint, after):
		rep.Findings = append(rep.Findings, changed(sessionPath, "the source's fingerprint differs from the one taken before it was read"))
	}
	if len(rep.Findings) > 0 || !rep.Verified() {
		return Passed{}, rep, fmt.Errorf("%s: %w (%d findings)", stagingDir, ErrNotVerified, len(rep.Findings))
	}
	return Passed{staging: stagingDir, session: sessionPath, fingerprint: after, report: rep.Verification, ok: true}, rep, nil
}

func changed(sessionPath, detail string) Finding {
	return Finding{Code: CodeSourceChanged, Class: ClassStale, Session: sessionPath, Path: sessionPath,
		Detail: detail + ": pi (or something else) wrote it during the migration", Repair: "pisess migrate: run again"}
}

// sameSource reports whether two fingerprints describe the same bytes in
// the same file: length, digest, device and inode (the change time may
// move without the bytes changing: a chmod, say).
func sameSource(a, b wire.SourceFingerprint) bool {
	if a.ByteLength != b.ByteLength || a.SHA256 != b.SHA256 {
		return false
	}
	if a.FileIdentity == nil || b.FileIdentity == nil {
		return a.FileIdentity == b.FileIdentity
	}
	return a.FileIdentity.Device == b.FileIdentity.Device && a.FileIdentity.Inode == b.FileIdentity.Inode
}
