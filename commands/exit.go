package commands

import (
	"context"
	"errors"

	"pisess/commands/engine"
	"pisess/readers"
)

// Exit statuses. The values are fsck(8)'s (0, 1, 4, 8, 16, 32 where fsck
// says "canceled by user"), but pisess returns exactly one of them, never a
// bitwise OR: a batch with repaired sessions and sessions left broken exits
// 4, not 5, so a script can test the status with == and the most urgent
// condition always wins. ExitCode is the one place that chooses.
const (
	ExitClean       = 0  // nothing wrong (or nothing to do)
	ExitRepaired    = 1  // problems were found and every one was repaired
	ExitProblems    = 4  // problems were found and some are left
	ExitOperational = 8  // pisess could not run: I/O, unreadable input, refused source, interrupted
	ExitUsage       = 16 // wrong flags, arguments, option values or environment
	ExitLocked      = 32 // another pisess run holds the tree lock: try again later
)

// ExitCode maps what a command returned to its exit status, in one fixed
// order: usage errors first (a wrong invocation is never "broken data"),
// then the tree lock (checked before the generic operational case, which
// would otherwise swallow it), then any other error, and only when the
// command ran to the end, the report: problems left, all repaired, clean.
func ExitCode(rep engine.Report, err error) int {
	var usage *engine.UsageError
	switch {
	case errors.As(err, &usage):
		return ExitUsage
	case engine.IsTreeLocked(err):
		return ExitLocked
	case err != nil:
		return ExitOperational
	case rep == nil:
		return ExitClean
	case rep.Tally().Left() > 0:
		return ExitProblems
	case rep.Tally().Problems > 0:
		return ExitRepaired
	default:
		return ExitClean
	}
}

// exitUrgency ranks exit statuses in ExitCode's order, most urgent last.
var exitUrgency = map[int]int{ExitClean: 0, ExitRepaired: 1, ExitProblems: 2, ExitOperational: 3, ExitLocked: 4, ExitUsage: 5}

// WorstExit is the most urgent of several exit statuses, in ExitCode's
// order (usage, locked, operational, problems left, all repaired, clean):
// a root run over several trees, one child per tree, exits with it. A
// status outside the table counts as operational.
func WorstExit(codes ...int) int {
	worst, rank := ExitClean, 0
	for _, c := range codes {
		u, ok := exitUrgency[c]
		if !ok {
			c, u = ExitOperational, exitUrgency[ExitOperational]
		}
		if u > rank {
			worst, rank = c, u
		}
	}
	return worst
}

// Error classes of the --json failure object {"error":{"class","message"}}.
const (
	ClassUsage       = "usage"
	ClassLocked      = "locked"
	ClassRefused     = "refused"
	ClassCanceled    = "canceled"
	ClassOperational = "operational"
)

// errorClass names err for the --json failure object, in the order ExitCode
// uses, with two finer operational classes: a refused source and a run
// interrupted by a signal.
func errorClass(err error) string {
	var usage *engine.UsageError
	switch {
	case errors.As(err, &usage):
		return ClassUsage
	case engine.IsTreeLocked(err):
		return ClassLocked
	case readers.AsRefused(err) != nil:
		return ClassRefused
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	default:
		return ClassOperational
	}
}

// exitStatusHelp is the EXIT STATUS section that ends every command's help.
func exitStatusHelp(lines ...string) string {
	s := "EXIT STATUS:\n"
	for _, l := range lines {
		s += "   " + l + "\n"
	}
	return s
}
