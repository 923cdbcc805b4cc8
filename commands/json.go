package commands

import (
	"encoding/json"
	"io"
)

// errorDoc is the --json output of a command that failed.
type errorDoc struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Class   string `json:"class"`
	Message string `json:"message"`
}

// writeJSON writes v as one indented JSON object and a newline. HTML
// escaping is off: messages hold paths and quotes, not markup.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
