package payload

import (
	"errors"
	"testing"

	"pisess/readers"
)

func TestRenameHookRole(t *testing.T) {
	tests := []struct {
		name string
		line string
		want string // "" when nothing changes
	}{
		{"v2 message",
			`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"hookMessage","customType":"ext","content":"hi","display":true,"timestamp":1}}`,
			`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"custom","customType":"ext","content":"hi","display":true,"timestamp":1}}`},
		{"white space and escapes kept",
			`{ "type" : "message" , "message" : { "content":"\u00e9", "role" : "hook\u004dessage" , "n":1.50 } } `,
			`{ "type" : "message" , "message" : { "content":"\u00e9", "role" : "custom" , "n":1.50 } } `},
		{"last role wins",
			`{"type":"message","message":{"role":"user","role":"hookMessage"}}`,
			`{"type":"message","message":{"role":"user","role":"custom"}}`},
		{"last type wins",
			`{"type":"custom","type":"message","message":{"role":"hookMessage"}}`,
			`{"type":"custom","type":"message","message":{"role":"custom"}}`},
		{"earlier role overridden", `{"type":"message","message":{"role":"hookMessage","role":"user"}}`, ""},
		{"not a message entry", `{"type":"custom","message":{"role":"hookMessage"}}`, ""},
		{"other role", `{"type":"message","message":{"role":"custom"}}`, ""},
		{"message not an object", `{"type":"message","message":["hookMessage"]}`, ""},
		{"no message", `{"type":"message"}`, ""},
		{"not an object", `["message"]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.line + "\n")
			out, changed, err := RenameHookRole(in)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want + "\n"
			if tt.want == "" {
				want = tt.line + "\n"
			}
			if changed != (tt.want != "") || string(out) != want {
				t.Errorf("changed %v\n got: %s\nwant: %s", changed, out, want)
			}
		})
	}
}

func TestRenameHookRoleNotJSON(t *testing.T) {
	line := []byte(`{"type":"message","message":{"role":"hookMessage"}` + "\n")
	out, changed, err := RenameHookRole(line)
	var pe *Error
	if !errors.As(err, &pe) || pe.Class != readers.ClassMalformedJSON || changed || string(out) != string(line) {
		t.Fatalf("got %q, %v, %v", out, changed, err)
	}
}
