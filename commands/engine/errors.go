package engine

import (
	"errors"
	"fmt"

	"pisess/ledger"
	"pisess/writers/durable"
)

// UsageError says the caller asked for something pisess cannot do as asked:
// a bad option value, a missing or superfluous argument, an output directory
// that already exists. It maps to exit status 16.
type UsageError struct {
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef builds a *UsageError from a format string.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// ErrTreeLocked may be wrapped by an error that means "another pisess run
// holds the tree lock" (ledger.ErrTreeLocked, the same value): it maps to
// exit status 32, not 8, so that cron can tell "try later" from "broken".
var ErrTreeLocked = ledger.ErrTreeLocked

// IsTreeLocked reports whether err means another pisess run holds the tree
// lock: ErrTreeLocked or a *durable.TreeLockedError in its chain.
func IsTreeLocked(err error) bool {
	var tl *durable.TreeLockedError
	return errors.Is(err, ErrTreeLocked) || errors.As(err, &tl)
}
