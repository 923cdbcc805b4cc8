package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
)

// AppendResult says what `benchtool append` changed.
type AppendResult struct {
	Sessions int   `json:"sessions"` // sessions in the tree
	Appended int   `json:"appended"` // sessions given one more entry
	Bytes    int64 `json:"bytes"`    // source bytes of the appended sessions, after the append
}

func runAppend(args []string) error {
	fs := flag.NewFlagSet("append", flag.ExitOnError)
	every := fs.Int("every", 10, "append to sessions 0, N, 2N, ... in path order")
	fs.Parse(args)
	if fs.NArg() != 1 || *every < 1 {
		return errors.New("append: want -every N (N >= 1) and exactly one TREE")
	}
	files, err := sessionFiles(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	res := AppendResult{Sessions: len(files)}
	for i := 0; i < len(files); i += *every {
		n, err := appendEntry(files[i])
		if err != nil {
			return err
		}
		res.Appended++
		res.Bytes += n
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// appendEntry appends one user message to the session at path, chained to
// its last entry, the way pi appends a turn: a new 8-hex id (derived from
// the path, so a run is reproducible, and checked not to be in use), the
// last entry as parent, a timestamp one second after it. It returns the
// file's new size.
func appendEntry(path string) (int64, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(src) == 0 || src[len(src)-1] != '\n' {
		return 0, fmt.Errorf("%s: does not end with a newline", path)
	}
	body := bytes.TrimRight(src, "\n")
	last := body[bytes.LastIndexByte(body, '\n')+1:]
	var prev struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Timestamp string `json:"timestamp"`
	}
	if err := json.Unmarshal(last, &prev); err != nil || prev.ID == "" || prev.Type == "session" {
		return 0, fmt.Errorf("%s: last line is not an entry with an id", path)
	}
	t, err := time.Parse(time.RFC3339Nano, prev.Timestamp)
	if err != nil {
		return 0, fmt.Errorf("%s: last entry's timestamp: %w", path, err)
	}
	t = t.Add(time.Second)
	id := freshID(path, src)
	line := fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":%q,"message":{"role":"user","content":"benchmark: one more turn after the migration","timestamp":%d}}`+"\n",
		id, prev.ID, t.UTC().Format("2006-01-02T15:04:05.000Z"), t.UnixMilli())
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return 0, err
	}
	return int64(len(src) + len(line)), f.Close()
}

// freshID is an 8-hex id no entry of src uses. The first candidate comes
// from the path and the file's length, so that each append to the same
// session starts from a new one (from the path alone, the n-th append
// tried the n-1 ids taken before it, each a scan of the whole file).
func freshID(path string, src []byte) string {
	id, _ := freshIDTries(path, src)
	return id
}

// freshIDTries is freshID and how many candidates it looked at.
func freshIDTries(path string, src []byte) (string, int) {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d", path, len(src)))
	for i := 0; ; i += 4 {
		id := hex.EncodeToString(sum[i%28 : i%28+4])
		if !bytes.Contains(src, []byte(`"id":"`+id+`"`)) {
			return id, i/4 + 1
		}
		if i%28 == 24 {
			sum = sha256.Sum256(sum[:])
		}
	}
}
