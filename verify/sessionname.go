package verify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"pisess/writers/wire"
)

// ScanJSONL passes once over a JSONL session: the name of its last
// session_info entry (parsing only lines that mention session_info) and
// the number of entry lines (lines after the header that are not blank).
func ScanJSONL(path string) (*string, uint64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s: not a regular file", path)
	}
	r := bufio.NewReaderSize(f, 256<<10)
	var (
		name  *string
		lines uint64
		first = true
		line  []byte
	)
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line[:0], chunk...)
		for errors.Is(err, bufio.ErrBufferFull) {
			chunk, err = r.ReadSlice('\n')
			line = append(line, chunk...)
		}
		if len(line) > 0 {
			switch {
			case first:
				first = false
			case len(bytes.TrimSpace(line)) > 0:
				lines++
				if bytes.Contains(line, []byte(`session_info`)) {
					if n, ok := sessionInfoName(line); ok {
						name = n
					}
				}
			}
		}
		if err == io.EOF {
			return name, lines, nil
		}
		if err != nil {
			return nil, 0, err
		}
	}
}

// sessionInfoName returns the name of a session_info entry line: ok with
// a nil name when the entry clears it.
func sessionInfoName(line []byte) (*string, bool) {
	v, err := wire.ParseJSON(bytes.TrimSpace(line), nil)
	if err != nil || v.Kind != wire.KindObject {
		return nil, false
	}
	if t, ok := v.Get("type"); !ok || t.Kind != wire.KindString || t.Str != "session_info" {
		return nil, false
	}
	n, ok := v.Get("name")
	if !ok || n.Kind != wire.KindString {
		return nil, true
	}
	s := n.Str
	return &s, true
}
