package ledger

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"pisess/writers/durable"
)

// LineDigest is the digest a journal line is acknowledged by: of its bytes
// without the newline, so that a torn last line is still recognised after
// the next append has terminated it.
func LineDigest(line []byte) string {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// ReadLines returns the wanted 1-based lines of path (each with its
// newline, when it has one), numbered as Journal.Scan numbers them.
func ReadLines(path string, want map[int64]bool) (map[int64][]byte, error) {
	f, err := durable.OS.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	out := map[int64][]byte{}
	for n := int64(1); len(out) < len(want); n++ {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && want[n] {
			out[n] = line
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return out, nil
}
