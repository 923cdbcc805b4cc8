package commands

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"pisess/commands/engine"
	"pisess/readers"
	"pisess/writers/durable"
)

type tally engine.Tally

func (t tally) Tally() engine.Tally { return engine.Tally(t) }

func TestExitCode(t *testing.T) {
	usage := engine.Usagef("bad flag")
	locked := &durable.TreeLockedError{Path: "/t/.pisess/lock", Holder: "pid=1"}
	refused := &readers.RefusedError{Path: "s.jsonl", Line: 3, Class: readers.ClassUnknownType, Reason: "custom_message"}
	tests := []struct {
		name string
		rep  engine.Report
		err  error
		want int
	}{
		{"clean", tally{}, nil, ExitClean},
		{"no report, no error", nil, nil, ExitClean},
		{"all repaired", tally{Problems: 3, Repaired: 3}, nil, ExitRepaired},
		{"some left", tally{Problems: 3, Repaired: 2}, nil, ExitProblems},
		{"none repaired", tally{Problems: 1}, nil, ExitProblems},
		{"operational", nil, errors.New("disk on fire"), ExitOperational},
		{"operational beats the report", tally{Problems: 1}, errors.New("io"), ExitOperational},
		{"refused source", nil, fmt.Errorf("build: %w", refused), ExitOperational},
		{"canceled", nil, fmt.Errorf("stage: %w", context.Canceled), ExitOperational},
		{"usage", nil, usage, ExitUsage},
		{"wrapped usage", nil, fmt.Errorf("x: %w", usage), ExitUsage},
		{"tree locked (durable)", nil, fmt.Errorf("migrate: %w", locked), ExitLocked},
		{"tree locked (sentinel)", nil, fmt.Errorf("migrate: %w", engine.ErrTreeLocked), ExitLocked},
		{"usage beats locked", nil, errors.Join(usage, locked), ExitUsage},
		{"locked beats operational", tally{Problems: 2}, errors.Join(errors.New("io"), locked), ExitLocked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(tt.rep, tt.err); got != tt.want {
				t.Errorf("ExitCode = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestErrorClass(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{engine.Usagef("x"), ClassUsage},
		{&durable.TreeLockedError{Path: "p"}, ClassLocked},
		{fmt.Errorf("b: %w", &readers.RefusedError{Class: readers.ClassBadHeader}), ClassRefused},
		{fmt.Errorf("b: %w", context.Canceled), ClassCanceled},
		{errors.New("eio"), ClassOperational},
	}
	for _, tt := range tests {
		if got := errorClass(tt.err); got != tt.want {
			t.Errorf("errorClass(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
