package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummary runs a real `go test -json` over a small module with a
// passing and a failing test and reads its stream: each top-level test is
// named when it starts and ends, with its subtests counted, and a failed
// test's output (its subtest's message included) is printed.
func TestSummary(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module demo\n\ngo 1.22\n")
	write("demo_test.go", `package demo

import "testing"

func TestCrashPasses(t *testing.T) {
	for _, n := range []string{"a", "b", "c"} {
		t.Run(n, func(t *testing.T) {})
	}
}

func TestCrashFails(t *testing.T) {
	t.Run("step", func(t *testing.T) { t.Error("the sidecar is neither old nor new") })
}
`)
	cmd := exec.Command("go", "test", "-json", "-run", "Crash", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	stream, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("go test: %v (want exit 1)\n%s", err, stream)
	}
	var out bytes.Buffer
	s := newSummary(&out)
	s.read(bytes.NewReader(stream))
	got := out.String()
	for _, want := range []string{
		"run   demo TestCrashPasses\n",
		"pass  demo TestCrashPasses (",
		", 3 subtests)\n",
		"run   demo TestCrashFails\n",
		"fail  demo TestCrashFails (",
		"the sidecar is neither old nor new",
		"FAIL  demo (",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if !s.failed || s.ran != 2 {
		t.Errorf("failed=%v ran=%d, want true 2:\n%s", s.failed, s.ran, got)
	}
}
