package commands

import (
	"encoding/json"
	"io"
)

// errorDoc is the --json output of a command that failed.
type errorDoc struct {
	Schema string    `json:"schema"`
	Error  errorBody `json:"error"`
	// Report is the partial report of an interrupted run.
	Report any `json:"report,omitempty"`
}

type errorBody struct {
	Class   string `json:"class"`
	Message string `json:"message"`
	// CorrelationID names the run that failed, when it had one.
	CorrelationID string `json:"correlationId,omitempty"`
}

// writeJSON writes v as one compact JSON object and a newline. HTML
// escaping is off: messages hold paths and quotes, not markup.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v) // compact: one document per line
}

// errorDoc is the --json document of a usage or fatal error: the same
// shape as ever, with the schema it belongs to.
func newErrorDoc(class, message string) errorDoc {
	return errorDoc{Schema: ReportSchema, Error: errorBody{Class: class, Message: message}}
}
