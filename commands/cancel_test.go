package commands

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pisess/ledger"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// TestCancelNamesTheRun interrupts a real migrate (SIGINT to a child
// process) while it waits for a session that pi holds locked: the error,
// in text and in --json, names the run's correlation id and how to undo
// it, the --json error carries the partial report, and the journal records
// the interrupted session as a recoverable io_failure (not as damage).
func TestCancelNamesTheRun(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		root := t.TempDir()
		dir := filepath.Join(root, "--p--")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		example, err := os.ReadFile(exampleSession)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"a.jsonl", "b.jsonl"} {
			if err := os.WriteFile(filepath.Join(dir, n), example, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		// pi holds b's session lock.
		lock, err := durable.OS.LockFile(t.Context(), filepath.Join(dir, "b.jsonl.lock"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"migrate", "--jobs", "1", "--lock-timeout", "1m", "--correlation-id", "cancel-run-0001", root}
		if asJSON {
			// JSON logs too: the canceled session's record is checked.
			args = append(args, "--json", "--log-format", "json")
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), envTestMain+"=1")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the run has finished a.jsonl and waits for b's lock.
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Lstat(filepath.Join(dir, "a.v2")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("a.jsonl was never migrated: %s", errb.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		lock.Unlock()
		code := cmd.ProcessState.ExitCode()
		if code != ExitOperational {
			t.Fatalf("exit %d (%v)\nstdout %s\nstderr %s", code, err, out.String(), errb.String())
		}
		if asJSON {
			var doc struct {
				Error struct {
					Class, Message, CorrelationID string
				}
				Report struct {
					Sessions []struct{ Path, Outcome string }
				}
			}
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("stdout is not the JSON error: %v\n%s", err, out.String())
			}
			if doc.Error.Class != ClassCanceled || doc.Error.CorrelationID != "cancel-run-0001" || len(doc.Report.Sessions) == 0 {
				t.Errorf("JSON error %+v", doc)
			}
			// Each log record is one JSON object whose keys are unique:
			// the canceled session's names the run once.
			checkJSONLines(t, "stderr", errb.String())
			var canceled map[string]any
			for _, l := range strings.Split(errb.String(), "\n") {
				var rec map[string]any
				if json.Unmarshal([]byte(l), &rec) == nil && rec["message"] == "session canceled" {
					canceled = rec
				}
			}
			if canceled == nil || canceled["correlationId"] != "cancel-run-0001" || !strings.HasSuffix(canceled["session"].(string), "b.jsonl") {
				t.Errorf("no session canceled record naming the run and b.jsonl:\n%s", errb.String())
			}
		} else {
			msg := errb.String()
			if !strings.Contains(msg, "run cancel-run-0001 (migrate) was interrupted") || !strings.Contains(msg, "pisess rollback --tree "+root+" cancel-run-0001") {
				t.Errorf("the cancel message does not name the run and its undo:\n%s", msg)
			}
		}
		j, _ := ledger.OpenJournal(root)
		recs, err := j.Records("cancel-run-0001")
		if err != nil {
			t.Fatal(err)
		}
		var failed *wire.MigrationEvent
		for _, r := range recs {
			if ev := r.Event; ev != nil && ev.Phase == wire.PhaseFailed && strings.HasSuffix(ev.SourcePath, "b.jsonl") {
				failed = ev
			}
			if ev := r.Event; ev != nil && ev.ErrorClass == wire.ErrorClassAtomicityViolation {
				t.Errorf("the cancel is journaled as an atomicity violation: %+v", ev)
			}
		}
		if failed == nil || failed.ErrorClass != wire.ErrorClassIOFailure || failed.Outcome != wire.OutcomeRecoverableError {
			t.Errorf("b's interrupted migration is journaled as %+v, want a recoverable io_failure", failed)
		}
	}
}
