package payload

import (
	"sort"

	"pisess/readers"
	"pisess/writers/wire"
)

// This file describes the reference's session-entry types (src/session.rs
// SessionEntry and the entry structs, src/model.rs for messages and content)
// as data: each struct with its members in declaration order and the serde
// attributes that change how they are read or written. decode.go and
// write.go interpret these descriptions the way serde's derived code would.

// kind is what a member's Rust type is, as far as reading and writing go.
type kind uint8

const (
	kString      kind = iota // String
	kU64                     // u64
	kI64                     // i64
	kI32                     // i32
	kF64                     // f64: accepts any number, always written as a float
	kBool                    // bool
	kValue                   // serde_json::Value: anything, objects key-sorted, last duplicate wins
	kOption                  // Option<elem>: null or absent is None
	kVec                     // Vec<elem>
	kStruct                  // a derived struct (st)
	kTagged                  // an internally tagged enum (en)
	kUnitEnum                // an externally tagged enum of unit variants (en)
	kUserContent             // the untagged enum UserContent: String or Vec<ContentBlock>
	kExtra                   // HashMap<String, Value>, only as a flattened member
)

type typ struct {
	kind kind
	elem *typ
	st   *structDef
	en   *enumDef
}

// field is one struct member.
type field struct {
	name string
	t    *typ
	// dflt is #[serde(default)]: a missing member takes its type's default
	// (false for bool, None for an Option).
	dflt bool
	// skipNone is skip_serializing_if = "Option::is_none": a None is not
	// written (otherwise it is written as null).
	skipNone bool
	// flatten is #[serde(flatten)]: the member's own members sit in the
	// enclosing object.
	flatten bool
	// key is the name as a member key (set by init).
	key memberName
}

// memberName is a model name as a member key: the name, its JSON with the
// colon that follows it, and its rank among all the model's names in byte
// order, so that comparing ranks sorts members as comparing names would.
type memberName struct {
	text  string
	label string
	rank  int
	word  uint64 // wire.StrWord(text)
}

// is reports whether string node k of t is the name.
func (n *memberName) is(t *wire.Tape, k int) bool {
	return t.StrWord(k) == n.word && (len(n.text) < 8 || string(t.StrBytes(k)) == n.text)
}

// structDef is a derived struct, or the struct body of an enum variant.
type structDef struct {
	// expecting is the derived visitor's own description, which serde uses
	// in "invalid type" errors: "struct Usage",
	// "struct variant SessionMessage::User".
	expecting string
	fields    []field

	// Set by init: whether a member is flattened, and the wire.StrWord of
	// each member's name.
	flatten bool
	words   []uint64
	// id tells the structs apart in reader.bound; never 0.
	id uint32
}

func (s *structDef) hasFlatten() bool { return s.flatten }

// own returns the index of the non-flattened member named by string node
// k of t, or -1. Every member of every object is looked up so, most in
// vain: comparing words (memberName.is) first makes a miss cost an integer
// comparison, and a hit on a name of up to seven bytes too.
func (s *structDef) own(t *wire.Tape, k int) int {
	w := t.StrWord(k)
	for i, fw := range s.words {
		if fw == w && !s.fields[i].flatten && (len(s.fields[i].name) < 8 || s.fields[i].name == string(t.StrBytes(k))) {
			return i
		}
	}
	return -1
}

// enumDef is an enum: internally tagged (tag set) or of unit variants.
type enumDef struct {
	name     string
	tag      string
	tagKey   memberName // the tag as a member key (set by init)
	lits     []string   // the variants' names as JSON (set by init)
	variants []variant
	// unknownClass classifies an unknown variant (an unknown entry type or
	// message role is worth its own class).
	unknownClass readers.Class
}

type variant struct {
	name string
	body *structDef // nil for unit variants
}

func (e *enumDef) names() []string {
	out := make([]string, len(e.variants))
	for i, v := range e.variants {
		out[i] = v.name
	}
	return out
}

func (e *enumDef) lookup(name []byte) int {
	for i, v := range e.variants {
		if v.name == string(name) {
			return i
		}
	}
	return -1
}

var (
	tString      = &typ{kind: kString}
	tU64         = &typ{kind: kU64}
	tI64         = &typ{kind: kI64}
	tI32         = &typ{kind: kI32}
	tF64         = &typ{kind: kF64}
	tBool        = &typ{kind: kBool}
	tValue       = &typ{kind: kValue}
	tUserContent = &typ{kind: kUserContent}
	tExtra       = &typ{kind: kExtra}
)

func optional(t *typ) *typ       { return &typ{kind: kOption, elem: t} }
func seqOf(t *typ) *typ          { return &typ{kind: kVec, elem: t} }
func structOf(s *structDef) *typ { return &typ{kind: kStruct, st: s} }

// req is a required member; opt an Option member written only when Some;
// optNull an Option member written as null when None.
func req(name string, t *typ) field { return field{name: name, t: t} }
func opt(name string, t *typ) field { return field{name: name, t: optional(t), skipNone: true} }
func optNull(name string, t *typ) field {
	return field{name: name, t: optional(t)}
}

// defaulted is a #[serde(default)] member: missing means its type's default.
func defaulted(f field) field {
	f.dflt = true
	return f
}

func flattened(name string, t *typ) field { return field{name: name, t: t, flatten: true} }

// model.rs: content blocks, usage, stop reason, assistant message.
var (
	contentBlock = &typ{kind: kTagged, en: &enumDef{
		name: "ContentBlock",
		tag:  "type",
		variants: []variant{
			{"text", &structDef{expecting: "struct TextContent", fields: []field{
				req("text", tString),
				opt("textSignature", tString),
			}}},
			{"thinking", &structDef{expecting: "struct ThinkingContent", fields: []field{
				req("thinking", tString),
				opt("thinkingSignature", tString),
			}}},
			{"redacted_thinking", &structDef{expecting: "struct RedactedThinkingContent", fields: []field{
				req("data", tString),
			}}},
			{"image", &structDef{expecting: "struct ImageContent", fields: []field{
				req("data", tString),
				req("mimeType", tString),
			}}},
			{"toolCall", &structDef{expecting: "struct ToolCall", fields: []field{
				req("id", tString),
				req("name", tString),
				req("arguments", tValue),
				opt("thoughtSignature", tString),
			}}},
		},
		unknownClass: readers.ClassBadEntry,
	}}

	// contentBlocks is Vec<ContentBlock>.
	contentBlocks = seqOf(contentBlock)

	cost = &structDef{expecting: "struct Cost", fields: []field{
		req("input", tF64),
		req("output", tF64),
		req("cacheRead", tF64),
		req("cacheWrite", tF64),
		req("total", tF64),
	}}

	usage = &structDef{expecting: "struct Usage", fields: []field{
		req("input", tU64),
		req("output", tU64),
		req("cacheRead", tU64),
		req("cacheWrite", tU64),
		req("totalTokens", tU64),
		req("cost", structOf(cost)),
	}}

	stopReason = &typ{kind: kUnitEnum, en: &enumDef{
		name: "StopReason",
		variants: []variant{
			{name: "stop"}, {name: "length"}, {name: "toolUse"}, {name: "error"},
			{name: "aborted"}, {name: "pauseTurn"}, {name: "refusal"},
		},
		unknownClass: readers.ClassBadEntry,
	}}

	stopDetails = &structDef{expecting: "struct StopDetails", fields: []field{
		req("type", tString),
		optNull("category", tString),
		optNull("explanation", tString),
	}}

	assistantMessage = &structDef{expecting: "struct AssistantMessage", fields: []field{
		req("content", contentBlocks),
		req("api", tString),
		req("provider", tString),
		req("model", tString),
		req("usage", structOf(usage)),
		req("stopReason", stopReason),
		defaulted(opt("stopDetails", structOf(stopDetails))),
		opt("errorMessage", tString),
		req("timestamp", tI64),
	}}
)

// session.rs: SessionMessage, tagged by "role".
var sessionMessage = &typ{kind: kTagged, en: &enumDef{
	name: "SessionMessage",
	tag:  "role",
	variants: []variant{
		{"user", &structDef{expecting: "struct variant SessionMessage::User", fields: []field{
			req("content", tUserContent),
			opt("timestamp", tI64),
		}}},
		{"assistant", &structDef{expecting: "struct variant SessionMessage::Assistant", fields: []field{
			flattened("message", structOf(assistantMessage)),
		}}},
		{"toolResult", &structDef{expecting: "struct variant SessionMessage::ToolResult", fields: []field{
			req("toolCallId", tString),
			req("toolName", tString),
			req("content", contentBlocks),
			opt("details", tValue),
			defaulted(req("isError", tBool)),
			opt("timestamp", tI64),
		}}},
		{"custom", &structDef{expecting: "struct variant SessionMessage::Custom", fields: []field{
			req("customType", tString),
			req("content", tString),
			defaulted(req("display", tBool)),
			opt("details", tValue),
			opt("timestamp", tI64),
		}}},
		{"bashExecution", &structDef{expecting: "struct variant SessionMessage::BashExecution", fields: []field{
			req("command", tString),
			req("output", tString),
			req("exitCode", tI32),
			opt("cancelled", tBool),
			opt("truncated", tBool),
			opt("fullOutputPath", tString),
			opt("timestamp", tI64),
			flattened("extra", tExtra),
		}}},
		{"branchSummary", &structDef{expecting: "struct variant SessionMessage::BranchSummary", fields: []field{
			req("summary", tString),
			req("fromId", tString),
		}}},
		{"compactionSummary", &structDef{expecting: "struct variant SessionMessage::CompactionSummary", fields: []field{
			req("summary", tString),
			req("tokensBefore", tU64),
		}}},
	},
	unknownClass: readers.ClassUnknownRole,
}}

// entryBase is EntryBase, flattened into every entry.
var entryBase = &structDef{expecting: "struct EntryBase", fields: []field{
	opt("id", tString),
	opt("parentId", tString),
	req("timestamp", tString),
}}

func base() field { return flattened("base", structOf(entryBase)) }

// sessionEntry is SessionEntry, tagged by "type". Every variant flattens
// EntryBase first, so its members lead the written entry.
var sessionEntry = &enumDef{
	name: "SessionEntry",
	tag:  "type",
	variants: []variant{
		{"message", &structDef{expecting: "struct MessageEntry", fields: []field{
			base(),
			req("message", sessionMessage),
		}}},
		{"model_change", &structDef{expecting: "struct ModelChangeEntry", fields: []field{
			base(),
			req("provider", tString),
			req("modelId", tString),
		}}},
		{"thinking_level_change", &structDef{expecting: "struct ThinkingLevelChangeEntry", fields: []field{
			base(),
			req("thinkingLevel", tString),
		}}},
		{"compaction", &structDef{expecting: "struct CompactionEntry", fields: []field{
			base(),
			req("summary", tString),
			req("firstKeptEntryId", tString),
			req("tokensBefore", tU64),
			opt("details", tValue),
			opt("fromHook", tBool),
		}}},
		{"branch_summary", &structDef{expecting: "struct BranchSummaryEntry", fields: []field{
			base(),
			req("fromId", tString),
			req("summary", tString),
			opt("details", tValue),
			opt("fromHook", tBool),
		}}},
		{"label", &structDef{expecting: "struct LabelEntry", fields: []field{
			base(),
			req("targetId", tString),
			opt("label", tString),
		}}},
		{"session_info", &structDef{expecting: "struct SessionInfoEntry", fields: []field{
			base(),
			opt("name", tString),
		}}},
		{"custom", &structDef{expecting: "struct CustomEntry", fields: []field{
			base(),
			req("customType", tString),
			opt("data", tValue),
		}}},
	},
	unknownClass: readers.ClassUnknownType,
}

// init completes the model: each struct's index of its members, and the
// rank of every name, so that sorting an object's members compares
// integers. Nothing changes afterwards.
func init() {
	var structs []*structDef
	var enums []*enumDef
	seen := map[any]bool{}
	var visit func(t *typ)
	visitStruct := func(s *structDef) {
		if seen[s] {
			return
		}
		seen[s] = true
		structs = append(structs, s)
		for _, f := range s.fields {
			visit(f.t)
		}
	}
	visitEnum := func(e *enumDef) {
		if seen[e] {
			return
		}
		seen[e] = true
		enums = append(enums, e)
		for _, v := range e.variants {
			if v.body != nil {
				visitStruct(v.body)
			}
		}
	}
	visit = func(t *typ) {
		switch {
		case t.elem != nil:
			visit(t.elem)
		case t.st != nil:
			visitStruct(t.st)
		case t.en != nil:
			visitEnum(t.en)
		}
	}
	visitEnum(sessionEntry)

	var names []string
	for _, s := range structs {
		for _, f := range s.fields {
			names = append(names, f.name)
		}
	}
	for _, e := range enums {
		if e.tag != "" {
			names = append(names, e.tag)
		}
	}
	sort.Strings(names)
	key := func(name string) memberName {
		return memberName{text: name, label: string(wire.AppendString(nil, name)) + ":",
			rank: sort.SearchStrings(names, name), word: wire.StrWord(name)}
	}
	for id, s := range structs {
		s.id = uint32(id + 1)
		s.words = make([]uint64, len(s.fields))
		for i := range s.fields {
			f := &s.fields[i]
			f.key = key(f.name)
			s.words[i] = wire.StrWord(f.name)
			if f.flatten {
				s.flatten = true
			}
		}
	}
	for _, e := range enums {
		if e.tag != "" {
			e.tagKey = key(e.tag)
		}
		for _, v := range e.variants {
			e.lits = append(e.lits, string(wire.AppendString(nil, v.name)))
		}
	}
}
