package ledger

import (
	"fmt"
	"sort"

	"pisess/writers/wire"
)

// SchemaRun is the schema of a run record in the tree journal: where a run
// began and how it ended (issue 34 §3: `runs` guessed a run's command,
// times and counts from its other records, calling a rolled-back migrate
// "fsck --repair", a refusal a failure, and a killed run finished).
const SchemaRun = "pisess.journal_run.v1"

// RunPhase is what a run record marks.
type RunPhase string

const (
	// RunStart: the run began writing to the tree (written just before
	// its first other record: a run that writes nothing writes neither).
	RunStart RunPhase = "start"
	// RunEnd: the run ended in order, with its summary. A start with no
	// end is a run that died (the golang-migrate "dirty" bit).
	RunEnd RunPhase = "end"
)

// RunRecord is one run record. A rollback brackets its records (which
// carry the id of the run it undoes) with a start and an end of command
// "rollback" and Of that id.
type RunRecord struct {
	CorrelationID string
	At            string // RFC 3339
	Phase         RunPhase
	Command       string // migrate, upgrade, fsck --repair, rollback
	Of            string // rollback: the run undone
	PID           int    // start: the process
	// End: the run's summary (its totals, by name), whether it was
	// interrupted (stopped in order before its end), and the runs that
	// died before it whose leftovers or tree lock it healed.
	Totals      map[string]int64
	Interrupted bool
	Healed      []string
}

// RunRecordOf makes a journal record of r.
func RunRecordOf(r RunRecord) Record { return Record{Run: &r} }

// CheckRun reports what makes r unfit for the journal.
func CheckRun(r RunRecord) error {
	switch {
	case !wire.ValidCorrelationID(r.CorrelationID):
		return fmt.Errorf("journal run record: correlationId %q does not match ^[A-Za-z0-9._:-]{8,128}$", r.CorrelationID)
	case !wire.ValidRFC3339(r.At):
		return fmt.Errorf("journal run record: at %q is not an RFC 3339 timestamp", r.At)
	case r.Phase != RunStart && r.Phase != RunEnd:
		return fmt.Errorf("journal run record: unknown phase %q", r.Phase)
	case r.Of != "" && !wire.ValidCorrelationID(r.Of):
		return fmt.Errorf("journal run record: of %q is not a correlation id", r.Of)
	}
	for _, id := range r.Healed {
		if !wire.ValidCorrelationID(id) {
			return fmt.Errorf("journal run record: healed %q is not a correlation id", id)
		}
	}
	return nil
}

// AppendRun appends r as a compact line with its newline; the optional
// members are omitted when empty, totals in sorted order.
func AppendRun(dst []byte, r RunRecord) []byte {
	members := []wire.Member{
		{Key: "schema", Value: wire.String(SchemaRun)},
		{Key: "correlationId", Value: wire.String(r.CorrelationID)},
		{Key: "at", Value: wire.String(r.At)},
		{Key: "phase", Value: wire.String(string(r.Phase))},
	}
	if r.Command != "" {
		members = append(members, wire.Member{Key: "command", Value: wire.String(r.Command)})
	}
	if r.Of != "" {
		members = append(members, wire.Member{Key: "of", Value: wire.String(r.Of)})
	}
	if r.PID > 0 {
		members = append(members, wire.Member{Key: "pid", Value: wire.I64(int64(r.PID))})
	}
	if len(r.Totals) > 0 {
		names := make([]string, 0, len(r.Totals))
		for k := range r.Totals {
			names = append(names, k)
		}
		sort.Strings(names)
		t := make([]wire.Member, 0, len(names))
		for _, k := range names {
			t = append(t, wire.Member{Key: k, Value: wire.I64(r.Totals[k])})
		}
		members = append(members, wire.Member{Key: "totals", Value: wire.Object(t...)})
	}
	if r.Interrupted {
		members = append(members, wire.Member{Key: "interrupted", Value: wire.Bool(true)})
	}
	if len(r.Healed) > 0 {
		ids := make([]wire.Value, len(r.Healed))
		for i, id := range r.Healed {
			ids[i] = wire.String(id)
		}
		members = append(members, wire.Member{Key: "healed", Value: wire.Array(ids...)})
	}
	return append(wire.AppendCompact(dst, wire.Object(members...)), '\n')
}

// ParseRun decodes a run record line (with its newline). Unknown members
// are ignored (a newer pisess's); a duplicate or mistyped member is
// refused, and so is a record CheckRun refuses.
func ParseRun(line []byte) (RunRecord, error) {
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return RunRecord{}, fmt.Errorf("journal run record: line is not LF-terminated")
	}
	v, err := wire.ParseJSON(line[:len(line)-1], nil)
	if err != nil {
		return RunRecord{}, fmt.Errorf("journal run record: %w", err)
	}
	if v.Kind != wire.KindObject {
		return RunRecord{}, fmt.Errorf("journal run record: not an object")
	}
	var r RunRecord
	seen := map[string]bool{}
	bad := func(key, want string) error {
		return fmt.Errorf("journal run record: member %s is not %s", key, want)
	}
	str := func(m wire.Member, dst *string) error {
		if m.Value.Kind != wire.KindString {
			return bad(m.Key, "a string")
		}
		*dst = m.Value.Str
		return nil
	}
	for _, m := range v.Obj {
		if seen[m.Key] {
			return RunRecord{}, fmt.Errorf("journal run record: duplicate member %s", m.Key)
		}
		seen[m.Key] = true
		var err error
		switch m.Key {
		case "schema":
			var s string
			if err = str(m, &s); err == nil && s != SchemaRun {
				err = fmt.Errorf("journal run record: unsupported schema %q", s)
			}
		case "correlationId":
			err = str(m, &r.CorrelationID)
		case "at":
			err = str(m, &r.At)
		case "phase":
			var s string
			err = str(m, &s)
			r.Phase = RunPhase(s)
		case "command":
			err = str(m, &r.Command)
		case "of":
			err = str(m, &r.Of)
		case "pid":
			if m.Value.Kind != wire.KindNumber || m.Value.Num.Kind != wire.NumU64 || m.Value.Num.U > 1<<31 {
				err = bad(m.Key, "a process id")
			}
			r.PID = int(m.Value.Num.U)
		case "totals":
			if m.Value.Kind != wire.KindObject {
				err = bad(m.Key, "an object")
				break
			}
			r.Totals = map[string]int64{}
			for _, t := range m.Value.Obj {
				if t.Value.Kind != wire.KindNumber || t.Value.Num.Kind != wire.NumU64 || t.Value.Num.U > 1<<62 {
					err = bad("totals."+t.Key, "a count")
					break
				}
				r.Totals[t.Key] = int64(t.Value.Num.U)
			}
		case "interrupted":
			if m.Value.Kind != wire.KindBool {
				err = bad(m.Key, "a boolean")
			}
			r.Interrupted = m.Value.Bool
		case "healed":
			if m.Value.Kind != wire.KindArray {
				err = bad(m.Key, "an array")
				break
			}
			for _, id := range m.Value.Arr {
				if id.Kind != wire.KindString {
					err = bad(m.Key, "an array of strings")
					break
				}
				r.Healed = append(r.Healed, id.Str)
			}
		}
		if err != nil {
			return RunRecord{}, err
		}
	}
	if !seen["schema"] {
		return RunRecord{}, fmt.Errorf("journal run record: no schema")
	}
	if err := CheckRun(r); err != nil {
		return RunRecord{}, err
	}
	return r, nil
}
