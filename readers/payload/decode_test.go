package payload

import (
	"errors"
	"testing"

	"pisess/readers"
)

// The expectations below follow serde's derived code and serde_json as the
// reference builds them (serde 1.0.228, serde_json 1.0.149): see the
// comments in decode.go and top.go for the rules each one pins.

// msg wraps a message object in an entry.
func msg(body string) string {
	return `{"type":"message","id":"e1","parentId":"e0","timestamp":"t","message":` + body + `}`
}

// typedMsg is msg's typed serialization around a typed message.
func typedMsg(body string) string {
	return `{"type":"message","id":"e1","parentId":"e0","timestamp":"t","message":` + body + `}`
}

const (
	usageIn    = `"usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"input":0,"output":0.5,"cacheRead":1e-7,"cacheWrite":-1,"total":18446744073709551615}}`
	usageTyped = `"usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"input":0.0,"output":0.5,"cacheRead":1e-7,"cacheWrite":-1.0,"total":1.8446744073709552e+19}}`
	// assistantHead is an assistant message up to its content.
	assistantHead = `{"role":"assistant","api":"a","provider":"p","model":"m",` + usageIn + `,"stopReason":"stop","timestamp":5,"content":`
	assistantTail = `,"api":"a","provider":"p","model":"m",` + usageTyped + `,"stopReason":"stop","timestamp":5}`
)

func TestDecodeAccepted(t *testing.T) {
	tests := []struct {
		name  string
		line  string
		typed string
	}{
		// Entry types: unknown members dropped, base members first.
		{"model_change",
			`{"junk":1,"modelId":"m","type":"model_change","provider":"x","timestamp":"t","parentId":"p","id":"a"}`,
			`{"type":"model_change","id":"a","parentId":"p","timestamp":"t","provider":"x","modelId":"m"}`},
		{"thinking_level_change without id or parent",
			`{"type":"thinking_level_change","timestamp":"t","thinkingLevel":"high"}`,
			`{"type":"thinking_level_change","timestamp":"t","thinkingLevel":"high"}`},
		{"compaction with free-form details sorted",
			`{"type":"compaction","id":"a","timestamp":"t","summary":"s","firstKeptEntryId":"f","tokensBefore":5,"details":{"b":1,"a":[1,{"z":0,"y":-1}],"b":2},"fromHook":false}`,
			`{"type":"compaction","id":"a","timestamp":"t","summary":"s","firstKeptEntryId":"f","tokensBefore":5,"details":{"a":[1,{"y":-1,"z":0}],"b":2},"fromHook":false}`},
		{"branch_summary with null details",
			`{"type":"branch_summary","id":"a","timestamp":"t","summary":"s","fromId":"f","details":null}`,
			`{"type":"branch_summary","id":"a","timestamp":"t","fromId":"f","summary":"s"}`},
		{"label",
			`{"type":"label","id":"a","timestamp":"t","targetId":"b","label":"x"}`,
			`{"type":"label","id":"a","timestamp":"t","targetId":"b","label":"x"}`},
		{"label cleared",
			`{"type":"label","id":"a","timestamp":"t","targetId":"b","label":null}`,
			`{"type":"label","id":"a","timestamp":"t","targetId":"b"}`},
		{"session_info",
			`{"type":"session_info","id":"a","timestamp":"t","name":"n"}`,
			`{"type":"session_info","id":"a","timestamp":"t","name":"n"}`},
		{"custom with data",
			`{"type":"custom","id":"a","timestamp":"t","customType":"c","data":{"k":[1.5,true,null,"\u00e9\/"]}}`,
			`{"type":"custom","id":"a","timestamp":"t","customType":"c","data":{"k":[1.5,true,null,"é/"]}}`},
		{"null id and parent",
			`{"type":"custom","id":null,"parentId":null,"timestamp":"t","customType":"c","data":null}`,
			`{"type":"custom","timestamp":"t","customType":"c"}`},
		{"free-form numbers",
			`{"type":"custom","id":"a","timestamp":"t","customType":"c","data":[1e21,18446744073709551616,-0,1.0,-9223372036854775808,18446744073709551615,0.000025,1e-6]}`,
			`{"type":"custom","id":"a","timestamp":"t","customType":"c","data":[1e+21,1.8446744073709552e+19,-0.0,1.0,-9223372036854775808,18446744073709551615,0.000025,1e-6]}`},

		// Roles.
		{"user text",
			msg(`{"role":"user","content":"hi","timestamp":-9223372036854775808}`),
			typedMsg(`{"role":"user","content":"hi","timestamp":-9223372036854775808}`)},
		{"user blocks, null timestamp",
			msg(`{"timestamp":null,"content":[{"textSignature":"s","text":"a","type":"text"},{"type":"image","mimeType":"image/png","data":"d"}],"role":"user"}`),
			typedMsg(`{"role":"user","content":[{"type":"text","text":"a","textSignature":"s"},{"type":"image","data":"d","mimeType":"image/png"}]}`)},
		{"assistant with every block",
			msg(`{"role":"assistant","errorMessage":"e","stopDetails":{"explanation":"x","category":"c","type":"refusal"},"content":[` +
				`{"type":"thinking","thinking":"th","thinkingSignature":"ts"},` +
				`{"type":"redacted_thinking","data":"opaque"},` +
				`{"type":"toolCall","id":"c1","name":"bash","arguments":{"b":2,"a":1},"thoughtSignature":"g"},` +
				`{"type":"text","text":"done"}],` +
				`"api":"a","provider":"p","model":"m",` + usageIn + `,"stopReason":"toolUse","timestamp":5,"junk":true}`),
			typedMsg(`{"role":"assistant","content":[` +
				`{"type":"thinking","thinking":"th","thinkingSignature":"ts"},` +
				`{"type":"redacted_thinking","data":"opaque"},` +
				`{"type":"toolCall","id":"c1","name":"bash","arguments":{"a":1,"b":2},"thoughtSignature":"g"},` +
				`{"type":"text","text":"done"}],` +
				`"api":"a","provider":"p","model":"m",` + usageTyped + `,"stopReason":"toolUse","stopDetails":{"type":"refusal","category":"c","explanation":"x"},"errorMessage":"e","timestamp":5}`)},
		{"assistant stopDetails members default to null",
			msg(`{"role":"assistant","stopDetails":{"type":"refusal"},"content":[],"api":"a","provider":"p","model":"m",` + usageIn + `,"stopReason":"refusal","timestamp":5}`),
			typedMsg(`{"role":"assistant","content":[],"api":"a","provider":"p","model":"m",` + usageTyped + `,"stopReason":"refusal","stopDetails":{"type":"refusal","category":null,"explanation":null},"timestamp":5}`)},
		{"assistant null stopDetails and errorMessage",
			msg(`{"role":"assistant","stopDetails":null,"errorMessage":null,"content":[],"api":"a","provider":"p","model":"m",` + usageIn + `,"stopReason":"stop","timestamp":5}`),
			typedMsg(`{"role":"assistant","content":[]` + assistantTail)},
		{"tool call with null arguments",
			msg(assistantHead + `[{"type":"toolCall","id":"c","name":"n","arguments":null}]}`),
			typedMsg(`{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"n","arguments":null}]` + assistantTail)},
		{"toolResult defaults isError",
			msg(`{"role":"toolResult","toolCallId":"c","toolName":"n","content":[{"type":"text","text":"o"}],"details":null,"timestamp":null}`),
			typedMsg(`{"role":"toolResult","toolCallId":"c","toolName":"n","content":[{"type":"text","text":"o"}],"isError":false}`)},
		{"toolResult full",
			msg(`{"role":"toolResult","isError":true,"toolCallId":"c","toolName":"n","content":[],"details":{"z":1,"a":{"d":[],"c":{}}},"timestamp":7}`),
			typedMsg(`{"role":"toolResult","toolCallId":"c","toolName":"n","content":[],"details":{"a":{"c":{},"d":[]},"z":1},"isError":true,"timestamp":7}`)},
		{"custom role defaults display",
			msg(`{"role":"custom","customType":"x","content":"c","details":[2,1],"timestamp":3}`),
			typedMsg(`{"role":"custom","customType":"x","content":"c","display":false,"details":[2,1],"timestamp":3}`)},
		{"bashExecution keeps extra members",
			msg(`{"role":"bashExecution","zeta":{"b":1,"a":2},"command":"ls","output":"o","exitCode":-2147483648,"cancelled":false,"truncated":true,"fullOutputPath":"/f","timestamp":1,"alpha":1,"alpha":2}`),
			typedMsg(`{"role":"bashExecution","command":"ls","output":"o","exitCode":-2147483648,"cancelled":false,"truncated":true,"fullOutputPath":"/f","timestamp":1,"alpha":2,"zeta":{"a":2,"b":1}}`)},
		{"bashExecution null options",
			msg(`{"role":"bashExecution","command":"ls","output":"o","exitCode":2147483647,"cancelled":null,"truncated":null,"fullOutputPath":null,"timestamp":null}`),
			typedMsg(`{"role":"bashExecution","command":"ls","output":"o","exitCode":2147483647}`)},
		{"branchSummary role",
			msg(`{"role":"branchSummary","summary":"s","fromId":"f","extra":1}`),
			typedMsg(`{"role":"branchSummary","summary":"s","fromId":"f"}`)},
		{"compactionSummary role",
			msg(`{"role":"compactionSummary","summary":"s","tokensBefore":18446744073709551615}`),
			typedMsg(`{"role":"compactionSummary","summary":"s","tokensBefore":18446744073709551615}`)},

		// What serde also accepts from buffered content.
		{"struct as a sequence",
			msg(`{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":[1,2,3,4,10,[0,0.5,1e-7,-1,18446744073709551615]],"stopReason":"stop","timestamp":5}`),
			typedMsg(`{"role":"assistant","content":[]` + assistantTail)},
		{"unit variant as a single-key map",
			msg(`{"role":"assistant","content":[],"api":"a","provider":"p","model":"m",` + usageIn + `,"stopReason":{"stop":null},"timestamp":5}`),
			typedMsg(`{"role":"assistant","content":[]` + assistantTail)},
		{"unit variant with an empty map",
			msg(`{"role":"assistant","content":[],"api":"a","provider":"p","model":"m",` + usageIn + `,"stopReason":{"stop":{}},"timestamp":5}`),
			typedMsg(`{"role":"assistant","content":[]` + assistantTail)},
		{"variant index for a nested tag",
			msg(`{"role":0,"content":[{"type":0,"text":"x"}]}`),
			typedMsg(`{"role":"user","content":[{"type":"text","text":"x"}]}`)},
		{"tagged enum as a sequence",
			msg(`["user","hi",5]`),
			typedMsg(`{"role":"user","content":"hi","timestamp":5}`)},
		{"content block as a sequence",
			msg(assistantHead + `[["text","hello",null]]}`),
			typedMsg(`{"role":"assistant","content":[{"type":"text","text":"hello"}]` + assistantTail)},
		{"trailing white space",
			"{\"type\":\"custom\",\"timestamp\":\"t\",\"customType\":\"c\"} \t\r",
			`{"type":"custom","timestamp":"t","customType":"c"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Decode([]byte(tt.line + "\n"))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if got := string(e.Typed()); got != tt.typed {
				t.Errorf("typed\n got: %s\nwant: %s", got, tt.typed)
			}
		})
	}
}

func TestDecodeCanonical(t *testing.T) {
	line := msg(`{"role":"bashExecution","zeta":1,"command":"ls","output":"o","exitCode":0,"alpha":{"b":2,"a":1}}`)
	e, err := Decode([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"id":"e1","message":{"alpha":{"a":1,"b":2},"command":"ls","exitCode":0,"output":"o","role":"bashExecution","zeta":1},"parentId":"e0","timestamp":"t","type":"message"}`
	if got := string(e.Canonical()); got != want {
		t.Errorf("canonical\n got: %s\nwant: %s", got, want)
	}
}

func TestDecodeRefused(t *testing.T) {
	const (
		entryTypes = "expected one of `message`, `model_change`, `thinking_level_change`, `compaction`, " +
			"`branch_summary`, `label`, `session_info`, `custom`"
		roles = "expected one of `user`, `assistant`, `toolResult`, `custom`, `bashExecution`, " +
			"`branchSummary`, `compactionSummary`"
		blocks   = "expected one of `text`, `thinking`, `redacted_thinking`, `image`, `toolCall`"
		reasons  = "expected one of `stop`, `length`, `toolUse`, `error`, `aborted`, `pauseTurn`, `refusal`"
		mc       = `{"type":"model_change","timestamp":"t","modelId":"m","provider":`
		comp     = `{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryId":"f","tokensBefore":`
		user     = `{"role":"user","content":"x","timestamp":`
		bash     = `{"role":"bashExecution","command":"c","output":"o","exitCode":`
		cost     = `{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","stopReason":"stop","timestamp":5,"usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"output":0,"cacheRead":0,"cacheWrite":0,"total":0,"input":`
		stop     = `{"role":"assistant","content":[],"api":"a","provider":"p","model":"m",` + usageIn + `,"timestamp":5,"stopReason":`
		untagged = "data did not match any variant of untagged enum UserContent"
	)
	tests := []struct {
		name   string
		line   string
		detail string
		class  readers.Class
	}{
		// serde_json's wording of unexpected values.
		{"integer for string", mc + `5}`, "invalid type: integer `5`, expected a string", readers.ClassBadEntry},
		{"negative for string", mc + `-3}`, "invalid type: integer `-3`, expected a string", readers.ClassBadEntry},
		{"float for string", mc + `1.5}`, "invalid type: floating point `1.5`, expected a string", readers.ClassBadEntry},
		{"bool for string", mc + `true}`, "invalid type: boolean `true`, expected a string", readers.ClassBadEntry},
		{"null for string", mc + `null}`, "invalid type: null, expected a string", readers.ClassBadEntry},
		{"array for string", mc + `[1]}`, "invalid type: sequence, expected a string", readers.ClassBadEntry},
		{"object for string", mc + `{}}`, "invalid type: map, expected a string", readers.ClassBadEntry},

		// Numbers.
		{"u64 overflow is a float", comp + `18446744073709551616}`, "invalid type: floating point `1.8446744073709552e+19`, expected u64", readers.ClassBadEntry},
		{"integer -0 is a float", comp + `-0}`, "invalid type: floating point `-0.0`, expected u64", readers.ClassBadEntry},
		{"exponent integer is a float", comp + `1e21}`, "invalid type: floating point `1e+21`, expected u64", readers.ClassBadEntry},
		{"string for u64", comp + `"5"}`, `invalid type: string "5", expected u64`, readers.ClassBadEntry},
		{"negative u64", comp + `-1}`, "invalid value: integer `-1`, expected u64", readers.ClassBadEntry},
		{"i64 overflow", msg(user + `9223372036854775808}`), "invalid value: integer `9223372036854775808`, expected i64", readers.ClassBadEntry},
		{"float for i64", msg(user + `1.5}`), "invalid type: floating point `1.5`, expected i64", readers.ClassBadEntry},
		{"i32 overflow", msg(bash + `2147483648}`), "invalid value: integer `2147483648`, expected i32", readers.ClassBadEntry},
		{"i32 underflow", msg(bash + `-2147483649}`), "invalid value: integer `-2147483649`, expected i32", readers.ClassBadEntry},
		{"float for i32", msg(bash + `1.0}`), "invalid type: floating point `1.0`, expected i32", readers.ClassBadEntry},
		{"null for i32", msg(bash + `null}`), "invalid type: null, expected i32", readers.ClassBadEntry},
		{"string for f64", msg(cost + `"1"}}}`), `invalid type: string "1", expected f64`, readers.ClassBadEntry},
		{"null for f64", msg(cost + `null}}}`), "invalid type: null, expected f64", readers.ClassBadEntry},
		{"number out of range", msg(cost + `1e400}}}`), "number out of range at line 1 column 321", readers.ClassMalformedJSON},

		// Rust's Debug quoting of strings.
		{"debug quoting", msg(bash + `"a\"b\\\n\t\r\u0000'é\u00a0\u0301\u200b\u007f"}`),
			`invalid type: string "a\"b\\\n\t\r\0'é\u{a0}\u{301}\u{200b}\u{7f}", expected i32`, readers.ClassBadEntry},

		// Other types.
		{"string for bool", msg(`{"role":"toolResult","toolCallId":"c","toolName":"n","content":[],"isError":"yes"}`),
			`invalid type: string "yes", expected a boolean`, readers.ClassBadEntry},
		{"string for Vec", msg(`{"role":"toolResult","toolCallId":"c","toolName":"n","content":"x"}`),
			`invalid type: string "x", expected a sequence`, readers.ClassBadEntry},
		{"string for struct", msg(`{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":"u","stopReason":"stop","timestamp":5}`),
			`invalid type: string "u", expected struct Usage`, readers.ClassBadEntry},
		{"short sequence for struct", msg(`{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":[1,2],"stopReason":"stop","timestamp":5}`),
			"invalid length 2, expected struct Usage with 6 elements", readers.ClassBadEntry},
		{"long sequence for struct", msg(`{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":[1,2,3,4,5,[0,0,0,0,0],7],"stopReason":"stop","timestamp":5}`),
			"invalid length 7, expected 6 elements in sequence", readers.ClassBadEntry},
		{"content block sequence too short", msg(assistantHead + `[["text","hello"]]}`),
			"invalid length 1, expected struct TextContent with 2 elements", readers.ClassBadEntry},
		{"content block sequence too long", msg(assistantHead + `[["text","a",null,1]]}`),
			"invalid length 3, expected 2 elements in sequence", readers.ClassBadEntry},
		{"unknown stop reason", msg(stop + `"weird"}`), "unknown variant `weird`, " + reasons, readers.ClassBadEntry},
		{"number for unit enum", msg(stop + `5}`), "invalid type: integer `5`, expected string or map", readers.ClassBadEntry},
		{"empty map for unit enum", msg(stop + `{}}`), "invalid value: map, expected map with a single key", readers.ClassBadEntry},
		{"two-key map for unit enum", msg(stop + `{"stop":null,"stop":null}}`), "invalid value: map, expected map with a single key", readers.ClassBadEntry},
		{"unit variant with a value", msg(stop + `{"stop":1}}`), "invalid type: integer `1`, expected unit", readers.ClassBadEntry},
		{"unknown unit variant in a map", msg(stop + `{"nope":null}}`), "unknown variant `nope`, " + reasons, readers.ClassBadEntry},

		// Tagged enums in buffered content.
		{"string for message", msg(`"x"`), `invalid type: string "x", expected internally tagged enum SessionMessage`, readers.ClassBadEntry},
		{"no role", msg(`{"content":"x"}`), "missing field `role`", readers.ClassBadEntry},
		{"empty sequence for message", msg(`[]`), "missing field `role`", readers.ClassBadEntry},
		{"duplicate role", msg(`{"role":"user","content":"x","role":"user"}`), "duplicate field `role`", readers.ClassBadEntry},
		{"unknown role", msg(`{"role":"hookMessage","customType":"c","content":"x"}`), "unknown variant `hookMessage`, " + roles, readers.ClassUnknownRole},
		{"role index out of range", msg(`{"role":7}`), "invalid value: integer `7`, expected variant index 0 <= i < 7", readers.ClassBadEntry},
		{"null role", msg(`{"role":null}`), "invalid type: null, expected variant identifier", readers.ClassBadEntry},
		{"negative role", msg(`{"role":-1}`), "invalid type: integer `-1`, expected variant identifier", readers.ClassBadEntry},
		{"flattened variant from a sequence", msg(`["assistant"]`), "invalid type: sequence, expected struct variant SessionMessage::Assistant", readers.ClassBadEntry},
		{"unknown content block", msg(assistantHead + `[{"type":"audio","data":"x"}]}`), "unknown variant `audio`, " + blocks, readers.ClassBadEntry},
		{"missing tool arguments", msg(assistantHead + `[{"type":"toolCall","id":"c","name":"n"}]}`), "missing field `arguments`", readers.ClassBadEntry},
		{"user content number", msg(`{"role":"user","content":5}`), untagged, readers.ClassBadEntry},
		{"user content bad block", msg(`{"role":"user","content":[{"type":"text"}]}`), untagged, readers.ClassBadEntry},
		{"user content object", msg(`{"role":"user","content":{"type":"text","text":"x"}}`), untagged, readers.ClassBadEntry},
		{"stopDetails without type", msg(stop + `"stop","stopDetails":{}}`), "missing field `type`", readers.ClassBadEntry},

		// Duplicates in typed objects, and the order errors come in.
		{"duplicate member", msg(`{"role":"toolResult","toolCallId":"c","toolName":"n","content":[],"content":[]}`), "duplicate field `content`", readers.ClassBadEntry},
		{"duplicate base id", `{"type":"custom","id":null,"id":"x","timestamp":"t","customType":"c"}`, "duplicate field `id`", readers.ClassBadEntry},
		{"duplicate flattened member", msg(assistantHead + `[],"api":"b"}`), "duplicate field `api`", readers.ClassBadEntry},
		{"duplicate bash member", msg(bash + `0,"output":"p"}`), "duplicate field `output`", readers.ClassBadEntry},
		{"missing own before missing base", `{"type":"model_change","modelId":"m"}`, "missing field `provider`", readers.ClassBadEntry},
		{"missing in declaration order", `{"type":"model_change","timestamp":"t"}`, "missing field `provider`", readers.ClassBadEntry},
		{"missing own before duplicate base", `{"type":"model_change","timestamp":"a","timestamp":"b","modelId":"m"}`, "missing field `provider`", readers.ClassBadEntry},
		{"wrong types in map order", `{"type":"model_change","timestamp":"t","modelId":5,"provider":6}`, "invalid type: integer `5`, expected a string", readers.ClassBadEntry},
		{"own type error before base", `{"type":"model_change","timestamp":5,"provider":6,"modelId":"m"}`, "invalid type: integer `6`, expected a string", readers.ClassBadEntry},
		{"base type error", `{"type":"model_change","timestamp":5,"provider":"p","modelId":"m"}`, "invalid type: integer `5`, expected a string", readers.ClassBadEntry},
		{"flattened struct walks in map order", msg(`{"role":"assistant","content":[],"provider":5}`), "invalid type: integer `5`, expected a string", readers.ClassBadEntry},
		{"flattened struct missing member", msg(`{"role":"assistant","content":[],"provider":"p"}`), "missing field `api`", readers.ClassBadEntry},
		{"missing exitCode", msg(`{"role":"bashExecution","command":"c","output":"o","cancelled":true}`), "missing field `exitCode`", readers.ClassBadEntry},
		{"missing entry timestamp", `{"type":"label","id":"a","targetId":"b"}`, "missing field `timestamp`", readers.ClassBadEntry},

		// The top level: the tag is read while the line is, with a position.
		{"integer tag", `{"type":5}`, "invalid type: integer `5`, expected variant identifier at line 1 column 9", readers.ClassUnknownType},
		{"null tag", `{"type":null}`, "invalid type: null, expected variant identifier at line 1 column 12", readers.ClassUnknownType},
		{"array tag", `{"type":[1]}`, "invalid type: sequence, expected variant identifier at line 1 column 8", readers.ClassUnknownType},
		{"object tag", `{"type":{}}`, "invalid type: map, expected variant identifier at line 1 column 8", readers.ClassUnknownType},
		{"no variant index at the top", `{"type":0}`, "invalid type: integer `0`, expected variant identifier at line 1 column 9", readers.ClassUnknownType},
		{"unknown tag", `{"type":"custom_message","id":"a"}`, "unknown variant `custom_message`, " + entryTypes + " at line 1 column 24", readers.ClassUnknownType},
		{"unknown tag before a syntax error", `{"type":"weird","x":}`, "unknown variant `weird`, " + entryTypes + " at line 1 column 15", readers.ClassUnknownType},
		{"syntax error before the tag", `{"x":,"type":"weird"}`, "expected value at line 1 column 6", readers.ClassMalformedJSON},
		{"duplicate tag", `{"type":"message","type":"x"}`, "duplicate field `type` at line 1 column 24", readers.ClassBadEntry},
		{"duplicate tag, white space after the key", `{"type":"message","type"  :"x"}`, "duplicate field `type` at line 1 column 26", readers.ClassBadEntry},
		{"unknown tag, white space after the value", `{"type":"weird"  }`, "unknown variant `weird`, " + entryTypes + " at line 1 column 15", readers.ClassUnknownType},
		{"missing tag", `{"id":"x"}`, "missing field `type` at line 1 column 10", readers.ClassBadEntry},
		{"missing tag before trailing characters", `{"a":1} x`, "missing field `type` at line 1 column 7", readers.ClassBadEntry},
		{"content error before trailing characters", `{"type":"model_change","timestamp":"t"} x`, "missing field `provider`", readers.ClassBadEntry},
		{"trailing characters", `{"type":"custom","timestamp":"t","customType":"c"} x`, "trailing characters at line 1 column 52", readers.ClassMalformedJSON},
		{"integer line", `5`, "invalid type: integer `5`, expected internally tagged enum SessionEntry at line 1 column 1", readers.ClassBadEntry},
		{"string line", `"x" y`, `invalid type: string "x", expected internally tagged enum SessionEntry at line 1 column 3`, readers.ClassBadEntry},
		{"null line", `null`, "invalid type: null, expected internally tagged enum SessionEntry at line 1 column 4", readers.ClassBadEntry},
		{"empty array line", `[]`, "missing field `type` at line 1 column 2", readers.ClassBadEntry},
		{"array line with unknown tag", `[ "weird", }`, "unknown variant `weird`, " + entryTypes + " at line 1 column 9", readers.ClassUnknownType},
		{"array line with integer tag", `[5]`, "invalid type: integer `5`, expected variant identifier at line 1 column 2", readers.ClassUnknownType},
		{"array line with array tag", `[[`, "invalid type: sequence, expected variant identifier at line 1 column 1", readers.ClassUnknownType},
		{"array line", `["message",1] x`, "invalid type: sequence, expected struct MessageEntry", readers.ClassBadEntry},
		{"array line syntax error", `["message",}`, "expected value at line 1 column 12", readers.ClassMalformedJSON},
		{"torn line", `{"type":"custom","timestamp":"t","customType":"c"`, "EOF while parsing an object at line 2 column 0", readers.ClassMalformedJSON},
		{"lone surrogate", `{"type":"custom","timestamp":"t","customType":"\ud800"}`, "unexpected end of hex escape at line 1 column 54", readers.ClassLoneSurrogate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.line + "\n"))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want *Error", err, err)
			}
			if pe.Detail != tt.detail {
				t.Errorf("detail\n got: %s\nwant: %s", pe.Detail, tt.detail)
			}
			if pe.Class != tt.class {
				t.Errorf("class %s, want %s", pe.Class, tt.class)
			}
		})
	}
}

func TestEntryFields(t *testing.T) {
	// fields is the exported part of an Entry, comparable.
	type fields struct {
		Type, ID        string
		HasID           bool
		ParentID        string
		HasParent       bool
		Timestamp, Role string
		Name            string
		HasName         bool
	}
	tests := []struct {
		line string
		want fields
	}{
		{msg(`{"role":"custom","customType":"c","content":"x"}`),
			fields{Type: "message", ID: "e1", HasID: true, ParentID: "e0", HasParent: true, Timestamp: "t", Role: "custom"}},
		{`{"type":"session_info","id":null,"parentId":null,"timestamp":"t2","name":"n"}`,
			fields{Type: "session_info", Timestamp: "t2", Name: "n", HasName: true}},
		{`{"type":"session_info","timestamp":"t2","name":null}`,
			fields{Type: "session_info", Timestamp: "t2"}},
	}
	for _, tt := range tests {
		e, err := Decode([]byte(tt.line))
		if err != nil {
			t.Fatal(err)
		}
		got := fields{Type: e.Type, ID: e.ID, HasID: e.HasID, ParentID: e.ParentID, HasParent: e.HasParent,
			Timestamp: e.Timestamp, Role: e.Role, HasName: e.Name != nil}
		if e.Name != nil {
			got.Name = *e.Name
		}
		if got != tt.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.line, got, tt.want)
		}
	}
}

func TestSetIDAndParent(t *testing.T) {
	e, err := Decode([]byte(`{"type":"label","timestamp":"t","targetId":"x"}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	e.SetParent("p1")
	e.SetID("i1")
	const want = `{"type":"label","id":"i1","parentId":"p1","timestamp":"t","targetId":"x"}`
	if got := string(e.Typed()); got != want {
		t.Errorf("typed\n got: %s\nwant: %s", got, want)
	}
	e.SetID("i2")
	e.SetParent("p2")
	if !e.HasID || e.ID != "i2" || !e.HasParent || e.ParentID != "p2" {
		t.Errorf("fields: %+v", e)
	}
	const want2 = `{"id":"i2","parentId":"p2","targetId":"x","timestamp":"t","type":"label"}`
	if got := string(e.Canonical()); got != want2 {
		t.Errorf("canonical\n got: %s\nwant: %s", got, want2)
	}
}

func TestValidEntryID(t *testing.T) {
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'a'
	}
	tests := map[string]bool{
		"e0000001":             true,
		"A-z_9":                true,
		"5623f9c8-1f":          true,
		string(long[:128]):     true,
		string(long):           false,
		"":                     false,
		"has space":            false,
		"é":                    false,
		"a.b":                  false,
		"a/b":                  false,
		"a\n":                  false,
		"01a20023-7339-7074-x": true,
	}
	for id, want := range tests {
		if got := ValidEntryID(id); got != want {
			t.Errorf("ValidEntryID(%q) = %v, want %v", id, got, want)
		}
	}
}
