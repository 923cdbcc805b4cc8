package commands

import (
	"encoding/json"
	"io"
)

// errorDoc is the --json output of a command that failed.
type errorDoc struct {
	Error errorBody `json:"error"`
	// Report is the partial report of an interrupted run.
	Report any `json:"report,omitempty"`
}

type errorBody struct {
	Class   string `json:"class"`
	Message string `json:"message"`
	// CorrelationID names the run that failed, when it had one.
	CorrelationID string `json:"correlationId,omitempty"`
}

// writeJSON writes v as one indented JSON object and a newline. HTML
// escaping is off: messages hold paths and quotes, not markup.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
