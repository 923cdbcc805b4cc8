package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"pisess/writers/wire"
)

// NewCorrelationID returns a fresh run id: a random (version 4) UUID.
func NewCorrelationID() string { return uuid.NewString() }

// ValidCorrelationID reports whether id matches the contract's pattern
// ^[A-Za-z0-9._:-]{8,128}$ (FORMAT.md §7).
func ValidCorrelationID(id string) bool { return wire.ValidCorrelationID(id) }

// QuarantineDir is the quarantine's directory inside .pisess/.
const QuarantineDir = "quarantine"

// Quarantine returns the quarantine of one run:
// <tree>/.pisess/quarantine/<correlation id>/. Nothing pisess removes from
// a tree is deleted; it is moved here.
func Quarantine(tree, correlationID string) string {
	return filepath.Join(tree, PisessDir, QuarantineDir, correlationID)
}

// QuarantinePath returns where a run puts one thing it moves aside for a
// session: <quarantine>/<session rel path>.<kind>, e.g.
// ".pisess/quarantine/<id>/--home-u-proj--/2026_ab12.jsonl.sidecar". It is
// a pure function of its arguments, so a re-run after a crash and a
// rollback find what the run moved. kind is a short word (sidecar,
// displaced, source, staging, backup, ...) and must not contain a slash.
//
// sessionRelPath is the session's path relative to the tree (discover's
// Session.Rel). A path that is not local (absolute, or climbing out with
// "..") is not trusted to name a place: it is replaced by
// "_nonlocal/<sha256 of it>", still deterministic and inside the
// quarantine.
func QuarantinePath(tree, correlationID, sessionRelPath, kind string) string {
	rel := filepath.Clean(sessionRelPath)
	if !filepath.IsLocal(rel) {
		sum := sha256.Sum256([]byte(sessionRelPath))
		rel = filepath.Join("_nonlocal", hex.EncodeToString(sum[:]))
	}
	kind = strings.ReplaceAll(kind, "/", "_")
	return filepath.Join(Quarantine(tree, correlationID), rel+"."+kind)
}
