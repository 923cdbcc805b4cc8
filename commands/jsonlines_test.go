package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// checkJSONLines fails the test when a line of text that is a JSON object
// (a JSON log record, a progress line) holds a key twice in one object:
// encoding/json would keep the last silently, other parsers the first or
// neither.
func checkJSONLines(tb testing.TB, what, text string) {
	tb.Helper()
	for i, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		if err := noDuplicateKeys([]byte(l)); err != nil {
			tb.Errorf("%s line %d: %v\n%s", what, i+1, err, l)
		}
	}
}

// logFileOf is the log file a command line (or PISESS_LOG_FILE) names.
func logFileOf(args []string) string {
	for i, a := range args {
		switch {
		case a == "--":
			return os.Getenv("PISESS_LOG_FILE")
		case (a == "--log-file" || a == "-log-file") && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--log-file="):
			return strings.TrimPrefix(a, "--log-file=")
		}
	}
	return os.Getenv("PISESS_LOG_FILE")
}

// noDuplicateKeys decodes one JSON value token by token and returns an
// error naming the first key an object holds twice, or the value's syntax
// error.
func noDuplicateKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := walkValue(dec, "$"); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

func walkValue(dec *json.Decoder, path string) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch t {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				return fmt.Errorf("duplicate key %q in %s", key, path)
			}
			seen[key] = true
			if err := walkValue(dec, path+"."+key); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkValue(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil
}

func TestNoDuplicateKeys(t *testing.T) {
	for in, bad := range map[string]bool{
		`{"a":1,"b":{"a":2}}`:               false,
		`{"a":1,"a":2}`:                     true,
		`{"a":[{"x":1},{"x":2,"x":3}]}`:     true,
		`{"correlationId":"x","level":"w"}`: false,
		`{"a":1`:                            true,
		`{"a":1} {}`:                        true,
	} {
		if err := noDuplicateKeys([]byte(in)); (err != nil) != bad {
			t.Errorf("%s: %v", in, err)
		}
	}
}
