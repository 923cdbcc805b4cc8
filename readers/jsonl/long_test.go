package jsonl

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/readers"
)

// TestLineTooLong: a line of MaxLineBytes+1 bytes (newline excluded) is
// refused at its line; the file is made sparse, so it costs no disk.
func TestLineTooLong(t *testing.T) {
	for _, name := range []string{"last line", "middle line"} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "s.jsonl")
			head := testHeader + "\n" + msg("a1", "") + "\n"
			if err := os.WriteFile(p, []byte(head), 0o600); err != nil {
				t.Fatal(err)
			}
			size := int64(len(head)) + MaxLineBytes + 1
			if err := os.Truncate(p, size); err != nil { // MaxLineBytes+1 zero bytes, no newline
				t.Fatal(err)
			}
			if name == "middle line" {
				f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
				f.WriteString("\n" + msg("b2", "a1") + "\n")
				f.Close()
			}
			_, err := Open(p, Options{})
			mustRefuse(t, err, readers.ClassLineTooLong, 3, "JSONL line exceeds 104857600 bytes")
		})
	}
}

// TestLineAtLimit: a line of exactly MaxLineBytes (newline excluded, CR
// included) is read; one byte more is not.
func TestLineAtLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes a 100 MiB line")
	}
	for _, extra := range []int{0, 1} {
		p := filepath.Join(t.TempDir(), "s.jsonl")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		prefix := `{"type":"custom","id":"a1","timestamp":"t","customType":"x","data":"`
		suffix := "\"}\r"
		w.WriteString(testHeader + "\n" + prefix)
		chunk := strings.Repeat("a", 1<<16)
		for n := MaxLineBytes - len(prefix) - len(suffix) + extra; n > 0; {
			k := min(n, len(chunk))
			w.WriteString(chunk[:k])
			n -= k
		}
		w.WriteString(suffix + "\n")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		entries, _, err := readAll(t, p, Options{})
		if extra == 1 {
			mustRefuse(t, err, readers.ClassLineTooLong, 2)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || len(entries[0].Payload) < MaxLineBytes-200 {
			t.Fatalf("%d entries", len(entries))
		}
	}
}
