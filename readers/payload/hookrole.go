package payload

import "pisess/writers/wire"

// hookRole is a version-2 session's name for the message role that version 3
// (and the reference) calls custom.
const (
	hookRole   = "hookMessage"
	customRole = `"custom"`
)

// RenameHookRole rewrites a message entry whose role is hookMessage to role
// custom, the whole of the TypeScript pi's v2 → v3 entry migration
// (session-manager.ts migrateV2ToV3). It decides as that code does, where
// the last of duplicate members wins (JSON.parse): the entry's `type` is
// "message" and its `message` object's `role` is "hookMessage". Only the
// bytes of that role value change; the rest of the line is kept byte for
// byte. It returns the line unchanged and false when there is nothing to
// rename, and an *Error when the line is not JSON.
func RenameHookRole(line []byte) ([]byte, bool, error) {
	var (
		typ      wire.Value
		msg      wire.Value
		msgStart = -1
		msgEnd   int
	)
	_, err := wire.ParseJSON(line, func(m wire.TopMember) error {
		switch m.Key {
		case "type":
			typ = m.Value
		case "message":
			msg, msgStart, msgEnd = m.Value, m.ValueStart, m.ValueEnd
		}
		return nil
	})
	if err != nil {
		return line, false, fromSyntax(err)
	}
	if typ.Kind != wire.KindString || typ.Str != "message" || msg.Kind != wire.KindObject {
		return line, false, nil
	}
	var (
		role      wire.Value
		roleStart = -1
		roleEnd   int
	)
	// The message object, read on its own, gives the role's byte range.
	if _, err := wire.ParseJSON(line[msgStart:msgEnd], func(m wire.TopMember) error {
		if m.Key == "role" {
			role, roleStart, roleEnd = m.Value, m.ValueStart, m.ValueEnd
		}
		return nil
	}); err != nil {
		return line, false, fromSyntax(err)
	}
	if roleStart < 0 || role.Kind != wire.KindString || role.Str != hookRole {
		return line, false, nil
	}
	at, end := msgStart+roleStart, msgStart+roleEnd
	out := make([]byte, 0, len(line)-(end-at)+len(customRole))
	out = append(out, line[:at]...)
	out = append(out, customRole...)
	out = append(out, line[end:]...)
	return out, true, nil
}
