package wire_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"pisess/fixtures"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// The contract test validates a bundle assembled from a store pisess wrote
// against the reference's wire contract (draft 2020-12, formats asserted).

func compileContract(tb testing.TB) *jsonschema.Schema {
	tb.Helper()
	f, err := os.Open(fixtures.ContractPath(tb))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("contract.json", doc); err != nil {
		tb.Fatal(err)
	}
	sch, err := c.Compile("contract.json")
	if err != nil {
		tb.Fatal(err)
	}
	return sch
}

// splitLines returns a JSONL file's lines without newlines.
func splitLines(tb testing.TB, path string) [][]byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

func jsonValue(tb testing.TB, b []byte) wire.Value {
	tb.Helper()
	v, err := wire.ParseJSON(b, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// writeContractStore writes the tricky vector's entries with pisess, plus a
// checkpoint and a correlated ledger of every phase.
func writeContractStore(tb testing.TB) string {
	tb.Helper()
	ref := filepath.Join(fixtures.VectorsDir(tb), "accept", "tricky", "reference.v2")
	dir := filepath.Join(tb.TempDir(), "s.v2")
	clock := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	w, err := store.Create(dir, store.Options{Clock: clock})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	for _, line := range splitLines(tb, filepath.Join(ref, "segments", wire.SegmentFileName(1))) {
		f, err := wire.ParseFrame(append(line, '\n'))
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Append(f.EntryID, f.ParentEntryID, string(f.EntryType), f.Payload); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := w.WriteCheckpoint(wire.ReasonPostMigration); err != nil {
		tb.Fatal(err)
	}
	if _, err := w.WriteManifest("3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b", "jsonl_v3"); err != nil {
		tb.Fatal(err)
	}
	for _, phase := range []wire.Phase{wire.PhasePlanned, wire.PhaseStagingCopy, wire.PhaseIntegrityCheck, wire.PhaseCutoverCommit, wire.PhaseCompleted} {
		ev := wire.MigrationEvent{
			MigrationID: "0b6ee6a0-3f37-4d6c-9a52-6e1c9f8e2b11", Phase: phase,
			SourcePath: "/home/u/.pi/agent/sessions/--w--/s.jsonl", TargetPath: "/home/u/.pi/agent/sessions/--w--/s.v2",
			SourceFormat: wire.FormatJSONLv3, TargetFormat: wire.FormatNativeV2,
			Verification: wire.Verification{EntryCountMatch: true, HashChainMatch: true, IndexConsistent: true},
			Outcome:      wire.OutcomeOK, CorrelationID: "run-2026-01-01T00:00:00Z.0001",
		}
		if err := w.AppendLedger(ev); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Seal(); err != nil {
		tb.Fatal(err)
	}
	return dir
}

func transition(from, to, reason string) wire.Value {
	return wire.Object(
		wire.Member{Key: "fromState", Value: wire.String(from)},
		wire.Member{Key: "toState", Value: wire.String(to)},
		wire.Member{Key: "reason", Value: wire.String(reason)},
		wire.Member{Key: "at", Value: wire.String("2026-01-01T00:00:00.000Z")},
	)
}

// bundle assembles the contract bundle from the store's files.
func bundle(tb testing.TB, dir string, transitions []wire.Value) wire.Value {
	tb.Helper()
	manifest, err := os.ReadFile(store.ManifestPath(dir))
	if err != nil {
		tb.Fatal(err)
	}
	var frames, rows, checkpoints, events []wire.Value
	segs, _ := filepath.Glob(filepath.Join(store.SegmentsPath(dir), "*.seg"))
	sort.Strings(segs)
	for _, seg := range segs {
		for _, l := range splitLines(tb, seg) {
			frames = append(frames, jsonValue(tb, l))
		}
	}
	for _, l := range splitLines(tb, store.IndexPath(dir)) {
		rows = append(rows, jsonValue(tb, l))
	}
	cps, _ := filepath.Glob(filepath.Join(store.CheckpointsPath(dir), "*.json"))
	sort.Strings(cps)
	for _, p := range cps {
		b, _ := os.ReadFile(p)
		checkpoints = append(checkpoints, jsonValue(tb, b))
	}
	for _, l := range splitLines(tb, store.LedgerPath(dir)) {
		events = append(events, jsonValue(tb, l))
	}
	return wire.Object(
		wire.Member{Key: "schema", Value: wire.String(wire.SchemaContract)},
		wire.Member{Key: "manifest", Value: jsonValue(tb, manifest)},
		wire.Member{Key: "segments", Value: wire.Array(frames...)},
		wire.Member{Key: "offsetIndex", Value: wire.Array(rows...)},
		wire.Member{Key: "checkpoints", Value: wire.Array(checkpoints...)},
		wire.Member{Key: "migrationEvents", Value: wire.Array(events...)},
		wire.Member{Key: "stateTransitions", Value: wire.Array(transitions...)},
	)
}

func validate(tb testing.TB, sch *jsonschema.Schema, v wire.Value) error {
	tb.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(wire.AppendCompact(nil, v)))
	if err != nil {
		tb.Fatal(err)
	}
	return sch.Validate(inst)
}

// without returns v with the member at path (dot-separated, array items by
// index not supported: the first item is taken) removed.
func without(v wire.Value, path string) wire.Value {
	key, rest, nested := strings.Cut(path, ".")
	out := v
	out.Obj = nil
	for _, m := range v.Obj {
		switch {
		case m.Key != key:
			out.Obj = append(out.Obj, m)
		case nested && m.Value.Kind == wire.KindArray:
			items := append([]wire.Value{without(m.Value.Arr[0], rest)}, m.Value.Arr[1:]...)
			out.Obj = append(out.Obj, wire.Member{Key: key, Value: wire.Array(items...)})
		case nested:
			out.Obj = append(out.Obj, wire.Member{Key: key, Value: without(m.Value, rest)})
		}
	}
	return out
}

func TestStoreBundleSatisfiesTheContract(t *testing.T) {
	sch := compileContract(t)
	dir := writeContractStore(t)
	valid := []wire.Value{
		transition("CLEAN", "MIGRATION_STAGING", "migrate: staging built from the source"),
		transition("MIGRATION_STAGING", "MIGRATED", "verified and cut over"),
		transition("MIGRATED", "DIRTY", "pi appended to the source"),
		transition("DIRTY", "SEGMENT_SEALED", "segment sealed"),
		transition("SEGMENT_SEALED", "INDEXED", "index written"),
		transition("INDEXED", "CHECKPOINTED", "checkpoint 1"),
		transition("CHECKPOINTED", "ROLLED_BACK", "rollback to checkpoint 1"),
		transition("ROLLED_BACK", "DIRTY", "source changed again"),
		transition("DIRTY", "FAILED", "io failure"),
		transition("FAILED", "ROLLED_BACK", "rolled back"),
	}
	good := bundle(t, dir, valid)
	if err := validate(t, sch, good); err != nil {
		t.Fatalf("a pisess store's bundle fails the contract: %v", err)
	}

	t.Run("invalid state transition", func(t *testing.T) {
		for _, tr := range [][2]string{{"CLEAN", "INDEXED"}, {"MIGRATED", "CHECKPOINTED"}, {"FAILED", "CLEAN"}, {"DIRTY", "MIGRATED"}} {
			b := bundle(t, dir, append(append([]wire.Value{}, valid...), transition(tr[0], tr[1], "not allowed")))
			if err := validate(t, sch, b); err == nil {
				t.Errorf("%s → %s passed the contract", tr[0], tr[1])
			}
		}
		if err := validate(t, sch, bundle(t, dir, []wire.Value{transition("CLEAN", "DIRTY", "")})); err == nil {
			t.Error("an empty reason passed")
		}
	})

	t.Run("missing required member", func(t *testing.T) {
		for _, path := range []string{
			"migrationEvents",
			"manifest.sessionId",
			"manifest.integrity.chainHash",
			"segments.payloadSha256",
			"offsetIndex.crc32c",
			"checkpoints.reason",
			"migrationEvents.correlationId",
		} {
			if err := validate(t, sch, without(good, path)); err == nil {
				t.Errorf("without %s: passed the contract", path)
			}
		}
	})
}
