#!/usr/bin/env node
// pi-driver.mjs: drives the REAL pi (@mariozechner/pi-coding-agent, pinned in
// package.json) headlessly through its SessionManager, for pisess's tests.
//
// Subcommands (JSON on stdout, diagnostics on stderr, exit 0 on success):
//   generate <outdir> [--large N] [--seed S] [--clock ISO]
//   read <file> [--in-place] [--seed S] [--clock ISO]
//   read-many <file>... [--seed S] [--clock ISO]
//   append <file> <text> [--seed S] [--clock ISO]
//   write-legacy <outdir>
//   version
//
// --seed S   replaces pi's randomness (crypto.randomUUID for entry ids and
//            crypto.getRandomValues for uuidv7 session ids) by a seeded PRNG.
// --clock T  replaces the clock (Date.now / new Date()) by a fake one that
//            starts at T and advances 1 ms on every read.
// generate uses --seed 1 --clock 2026-01-02T03:04:05.000Z unless told
// otherwise; the other subcommands use the real clock and real randomness
// unless told otherwise. See NOTES.md for what pi itself does.
import { createRequire, syncBuiltinESMExports } from "node:module";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const require = createRequire(import.meta.url);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const PKG_DIR = path.join(HERE, "node_modules", "@mariozechner", "pi-coding-agent");
const PINNED = "0.73.1";

// ---------------------------------------------------------------------------
// Argument parsing
// ---------------------------------------------------------------------------

function parseArgs(argv) {
	const pos = [];
	const opt = {};
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i];
		if (a === "--") {
			pos.push(...argv.slice(i + 1));
			break;
		}
		if (a.startsWith("--")) {
			const key = a.slice(2);
			if (key === "in-place") {
				opt[key] = true;
				continue;
			}
			if (i + 1 >= argv.length) die(`option ${a} needs a value`);
			opt[key] = argv[++i];
			continue;
		}
		pos.push(a);
	}
	return { pos, opt };
}

function die(msg) {
	process.stderr.write(`pi-driver: ${msg}\n`);
	process.exit(2);
}

// ---------------------------------------------------------------------------
// Determinism: seeded randomness and a fake clock (opt-in)
// ---------------------------------------------------------------------------

function makePrng(seed) {
	// splitmix32-style generator: small, deterministic, good enough for ids.
	let s = seed >>> 0;
	return () => {
		s = (s + 0x9e3779b9) >>> 0;
		let z = s;
		z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
		z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
		return (z ^ (z >>> 16)) >>> 0;
	};
}

function installSeed(seed) {
	const next = makePrng(Number(seed));
	const fill = (buf) => {
		const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
		for (let i = 0; i < bytes.length; i++) bytes[i] = next() & 0xff;
		return buf;
	};
	const nodeCrypto = require("node:crypto");
	// session-manager.js does `import { randomUUID } from "crypto"`; a builtin's
	// ESM named exports are refreshed from the CJS object by syncBuiltinESMExports.
	nodeCrypto.randomUUID = () => {
		const b = fill(new Uint8Array(16));
		b[6] = (b[6] & 0x0f) | 0x40;
		b[8] = (b[8] & 0x3f) | 0x80;
		const h = Buffer.from(b).toString("hex");
		return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
	};
	syncBuiltinESMExports();
	// uuid (v7 session ids) calls globalThis.crypto.getRandomValues.
	Object.defineProperty(globalThis.crypto, "getRandomValues", { value: fill, configurable: true, writable: true });
}

function installClock(iso) {
	const RealDate = Date;
	let now = RealDate.parse(iso);
	if (Number.isNaN(now)) die(`bad --clock ${iso}`);
	const tick = () => now++;
	class FakeDate extends RealDate {
		constructor(...args) {
			if (args.length === 0) super(tick());
			else super(...args);
		}
		static now() {
			return tick();
		}
	}
	globalThis.Date = FakeDate;
}

function applyDeterminism(opt, defaults) {
	const seed = opt.seed ?? defaults.seed;
	const clock = opt.clock ?? defaults.clock;
	if (seed !== undefined && seed !== "random") installSeed(seed);
	if (clock !== undefined && clock !== "real") installClock(clock);
	return { seed: seed ?? null, clock: clock ?? null };
}

// ---------------------------------------------------------------------------
// pi itself
// ---------------------------------------------------------------------------

function ensureAgentDir() {
	// Never let pi touch ~/.pi: the caller should set PI_CODING_AGENT_DIR; if it
	// did not, use a fresh temp dir (and say so).
	if (!process.env.PI_CODING_AGENT_DIR) {
		const d = fs.mkdtempSync(path.join(os.tmpdir(), "pi-agent-"));
		process.env.PI_CODING_AGENT_DIR = d;
		process.stderr.write(`pi-driver: PI_CODING_AGENT_DIR unset, using ${d}\n`);
	}
}

function piVersion() {
	const pkg = JSON.parse(fs.readFileSync(path.join(PKG_DIR, "package.json"), "utf8"));
	return pkg.version;
}

async function loadPi() {
	if (!fs.existsSync(PKG_DIR)) die(`pi is not installed: run npm ci --prefix ${HERE}`);
	const v = piVersion();
	if (v !== PINNED) die(`installed pi is ${v}, expected ${PINNED}: run npm ci --prefix ${HERE}`);
	// The package's public entry (dist/index.js) re-exports SessionManager and
	// buildSessionContext from dist/core/session-manager.js; importing that module
	// directly skips loading every LLM provider SDK (1.4 s -> 40 ms). `version`
	// checks that both are the same objects.
	return import(pathToFileURL(path.join(PKG_DIR, "dist", "core", "session-manager.js")).href);
}

// ---------------------------------------------------------------------------
// Message builders (the shapes pi-ai / pi-coding-agent 0.73.1 persist)
// ---------------------------------------------------------------------------

const WORDS = (
	"session tree leaf branch fork compaction summary entry parent header cache token model " +
	"thinking tool result bash output buffer stream json line index value array object string " +
	"error return function module config directory migrate label name edit write read test"
).split(" ");

let textRng = makePrng(7);
function words(n) {
	const out = [];
	for (let i = 0; i < n; i++) out.push(WORDS[textRng() % WORDS.length]);
	const s = out.join(" ");
	return `${s[0].toUpperCase()}${s.slice(1)}.`;
}

const USAGE = () => ({
	input: 1200,
	output: 340,
	cacheRead: 800,
	cacheWrite: 0,
	totalTokens: 2340,
	cost: { input: 0.0036, output: 0.0051, cacheRead: 0.00024, cacheWrite: 0, total: 0.00894 },
});

function user(content) {
	return { role: "user", content, timestamp: Date.now() };
}

function assistant(content, extra = {}) {
	return {
		role: "assistant",
		content: typeof content === "string" ? [{ type: "text", text: content }] : content,
		api: extra.api ?? "anthropic-messages",
		provider: extra.provider ?? "anthropic",
		model: extra.model ?? "claude-sonnet-4-5",
		...(extra.responseId ? { responseId: extra.responseId } : {}),
		usage: USAGE(),
		stopReason: extra.stopReason ?? (Array.isArray(content) && content.some((b) => b.type === "toolCall") ? "toolUse" : "stop"),
		...(extra.errorMessage ? { errorMessage: extra.errorMessage } : {}),
		timestamp: Date.now(),
	};
}

function toolCall(id, name, args) {
	return { type: "toolCall", id, name, arguments: args };
}

function toolResult(toolCallId, toolName, content, extra = {}) {
	return {
		role: "toolResult",
		toolCallId,
		toolName,
		content: typeof content === "string" ? [{ type: "text", text: content }] : content,
		...(extra.details !== undefined ? { details: extra.details } : {}),
		isError: extra.isError ?? false,
		timestamp: Date.now(),
	};
}

function bash(command, output, exitCode, extra = {}) {
	return {
		role: "bashExecution",
		command,
		output,
		exitCode, // undefined is dropped by JSON.stringify, as when pi records a killed command
		cancelled: extra.cancelled ?? false,
		truncated: extra.truncated ?? false,
		...(extra.fullOutputPath ? { fullOutputPath: extra.fullOutputPath } : {}),
		timestamp: Date.now(),
		...(extra.excludeFromContext ? { excludeFromContext: true } : {}),
	};
}

// 8x8 PNG, valid, deterministic.
const PNG_8x8 =
	"iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEklEQVR4nGP4z8CAFWEXHbQSACj/P8Fu7N9hAAAAAElFTkSuQmCC";
// 1x1 GIF.
const GIF_1x1 = "R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==";

// ---------------------------------------------------------------------------
// generate
// ---------------------------------------------------------------------------

async function generate(outdir, opt) {
	const det = applyDeterminism(opt, { seed: "1", clock: "2026-01-02T03:04:05.000Z" });
	textRng = makePrng(Number(det.seed ?? 7) || 7);
	const { SessionManager } = await loadPi();
	const large = opt.large !== undefined ? Number.parseInt(opt.large, 10) : 500;
	if (!Number.isFinite(large) || large < 1) die(`bad --large ${opt.large}`);
	outdir = path.resolve(outdir);
	fs.mkdirSync(outdir, { recursive: true });
	const results = [];
	const CWD = "/home/dev/projects/demo";
	const dirFor = (name) => path.join(outdir, name);

	// Each scenario returns the SessionManager whose file is the scenario's file,
	// plus optional metadata.
	const scenario = (name, description, fn) => {
		const sm0 = fn(dirFor(name));
		const { sm, expect = {} } = sm0 instanceof SessionManager ? { sm: sm0 } : sm0;
		const file = sm.getSessionFile();
		const persisted = file !== undefined && fs.existsSync(file);
		const entries = sm.getEntries();
		const ids = new Set(entries.map((e) => e.id));
		const dangling = entries.filter((e) => e.parentId !== null && e.parentId !== undefined && !ids.has(e.parentId)).map((e) => e.id);
		results.push({
			scenario: name,
			description,
			path: file,
			persisted,
			sessionId: sm.getSessionId(),
			entryCount: entries.length,
			leafId: sm.getLeafId(),
			roots: entries.filter((e) => e.parentId === null).map((e) => e.id),
			danglingParents: dangling,
			entryTypes: [...new Set(entries.map((e) => e.type))].sort(),
			...expect,
		});
		return sm;
	};

	// 1. plain chat (string and block content, a session name)
	scenario("plain-chat", "user/assistant turns, string and block user content, session_info name", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		sm.appendMessage(user("Hello! What does this repo do?"));
		sm.appendMessage(assistant(words(30)));
		sm.appendMessage(user([{ type: "text", text: "Tell me more about the tests." }]));
		sm.appendMessage(assistant(words(40)));
		sm.appendSessionInfo("  Plain chat about the repo  ");
		sm.appendMessage(user("Thanks."));
		sm.appendMessage(assistant([{ type: "text", text: "You're welcome.", textSignature: JSON.stringify({ v: 1, id: "msg_01", phase: "final_answer" }) }]));
		return sm;
	});

	// 2. tool calls (every bashExecution carries an exitCode here)
	scenario("tool-calls", "model/thinking changes, parallel tool calls, tool results with details and errors, bashExecution, custom-role message", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		sm.appendModelChange("openai", "gpt-5.1-codex");
		sm.appendThinkingLevelChange("medium");
		sm.appendMessage(user("Run the tests and fix what fails."));
		const a = { api: "openai-responses", provider: "openai", model: "gpt-5.1-codex" };
		sm.appendMessage(
			assistant(
				[
					{ type: "text", text: "Looking around first." },
					toolCall("call_1", "bash", { command: "go test ./..." }),
					toolCall("call_2", "read", { path: "go.mod" }),
					toolCall("call_3", "grep", { pattern: "TODO", path: ".", ignoreCase: true, limit: 50 }),
				],
				a,
			),
		);
		sm.appendMessage(toolResult("call_1", "bash", "--- FAIL: TestParse (0.00s)\nFAIL\texit status 1", { isError: true }));
		sm.appendMessage(toolResult("call_2", "read", "module pisess\n\ngo 1.26\n", { details: { lines: 3, truncated: false } }));
		sm.appendMessage(toolResult("call_3", "grep", "main.go:12: // TODO: handle errors"));
		sm.appendMessage(assistant([toolCall("call_4", "edit", { path: "main.go", oldText: "x := 1", newText: "x := 2" })], a));
		sm.appendMessage(toolResult("call_4", "edit", "Edited main.go", { details: { diff: "-x := 1\n+x := 2\n", firstChangedLine: 12 } }));
		sm.appendMessage(assistant("Fixed.", a));
		sm.appendMessage(bash("ls -la", "total 0\ndrwxr-xr-x 2 dev dev 40 .\n", 0));
		sm.appendMessage(bash("make lint", "lint: 3 problems\n", 2, { truncated: true, fullOutputPath: "/tmp/pi-bash-0001.log" }));
		sm.appendMessage(bash("echo private", "private\n", 0, { excludeFromContext: true }));
		sm.appendMessage({ role: "custom", customType: "reminder", content: "Remember to run gofmt.", display: true, details: { level: 1 }, timestamp: Date.now() });
		sm.appendMessage(user("Great, thanks."));
		sm.appendMessage(assistant("Anything else?", a));
		return sm;
	});

	// 3. bashExecution without exitCode (pi writes exitCode: undefined, i.e. no member)
	scenario("bash-no-exitcode", "a cancelled bashExecution whose exitCode is undefined (member absent in the JSON)", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		sm.appendMessage(user("Start the server."));
		sm.appendMessage(assistant("Run it yourself with !."));
		sm.appendMessage(bash("sleep 1000", "", undefined, { cancelled: true }));
		sm.appendMessage(bash("npm run dev", "listening on :3000\n", undefined, { cancelled: true, excludeFromContext: true }));
		sm.appendMessage(user("Cancelled it."));
		sm.appendMessage(assistant("OK."));
		return sm;
	});

	// 4. thinking and models
	scenario("thinking-models", "thinking blocks (signed, redacted), thinking levels, model changes across providers, error/aborted/length stops, responseId", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		sm.appendThinkingLevelChange("high");
		sm.appendModelChange("anthropic", "claude-sonnet-4-5");
		sm.appendMessage(user("Think hard about this."));
		sm.appendMessage(
			assistant([
				{ type: "thinking", thinking: words(25), thinkingSignature: "EqQBCkYIBxgCKkDsig==" },
				{ type: "text", text: words(20) },
			]),
		);
		sm.appendMessage(user("And now?"));
		sm.appendMessage(
			assistant([
				{ type: "thinking", thinking: "", thinkingSignature: "RWRhY3RlZA==", redacted: true },
				{ type: "text", text: words(10) },
			]),
		);
		sm.appendMessage(
			assistant([
				{ type: "thinking", thinking: words(8) },
				toolCall("toolu_01", "read", { path: "a.txt" }),
				toolCall("toolu_02", "read", { path: "b.txt" }),
			]),
		);
		sm.appendMessage(toolResult("toolu_01", "read", "A"));
		sm.appendMessage(toolResult("toolu_02", "read", "B"));
		sm.appendMessage(assistant("Done reading.", { responseId: "msg_01XYZ" }));
		sm.appendModelChange("google", "gemini-2.5-pro");
		sm.appendThinkingLevelChange("low");
		sm.appendMessage(user("Switch model."));
		const g = { api: "google-generative-ai", provider: "google", model: "gemini-2.5-pro" };
		sm.appendMessage(assistant([], { ...g, stopReason: "error", errorMessage: "503 Service Unavailable" }));
		sm.appendMessage(user("Retry."));
		sm.appendMessage(assistant("Partial answ", { ...g, stopReason: "aborted", errorMessage: "Request was aborted" }));
		sm.appendMessage(assistant(words(60), { ...g, stopReason: "length" }));
		sm.appendThinkingLevelChange("off");
		sm.appendThinkingLevelChange("xhigh");
		sm.appendMessage(user("Final question."));
		sm.appendMessage(assistant("Final answer.", g));
		return sm;
	});

	// 5. images
	scenario("images", "images in user messages, tool results and image-only content", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		sm.appendMessage(user([{ type: "text", text: "What is in this screenshot?" }, { type: "image", data: PNG_8x8, mimeType: "image/png" }]));
		sm.appendMessage(assistant("A tiny gradient."));
		sm.appendMessage(user("Take a screenshot yourself."));
		sm.appendMessage(assistant([toolCall("call_img", "screenshot", { region: "full" })]));
		sm.appendMessage(toolResult("call_img", "screenshot", [{ type: "text", text: "Captured." }, { type: "image", data: GIF_1x1, mimeType: "image/gif" }]));
		sm.appendMessage(user([{ type: "image", data: PNG_8x8, mimeType: "image/png" }]));
		sm.appendMessage(assistant("Same image again."));
		return sm;
	});

	// 6. branching (in-place: branch, branchWithSummary, resetLeaf)
	scenario("branching", "branch(), branchWithSummary() from an entry and from the root (null), resetLeaf() making a second root; the leaf is not persisted", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		const u1 = sm.appendMessage(user("Start: design the migration tool."));
		const a1 = sm.appendMessage(assistant(words(20)));
		sm.appendMessage(user("Option A?"));
		const a2 = sm.appendMessage(assistant(words(20)));
		sm.appendMessage(user("Go deeper on A."));
		sm.appendMessage(assistant(words(20)));
		sm.branch(a1);
		sm.appendMessage(user("Option B instead?"));
		sm.appendMessage(assistant(words(20)));
		sm.branchWithSummary(a2, "Explored B; it was worse than A.", { readFiles: ["go.mod"], modifiedFiles: [] }, false);
		sm.appendMessage(user("Back on A, continue."));
		sm.appendMessage(assistant(words(15)));
		sm.branchWithSummary(null, "Summary of everything before restarting at the root.", { custom: true }, true);
		sm.appendMessage(user("Fresh start from the summary."));
		sm.appendMessage(assistant(words(10)));
		sm.resetLeaf();
		sm.appendMessage(user("Re-edited first message (a second root)."));
		sm.appendMessage(assistant(words(10)));
		// A leaf move that is never followed by an append is lost: pi reopens at the last line.
		sm.branch(u1);
		return { sm, expect: { leafIdInMemory: sm.getLeafId(), leafIdOnReopen: sm.getEntries().at(-1).id } };
	});

	// 7. compaction
	scenario("compaction", "three compactions: pi's default details, an extension's (fromHook) and one whose firstKeptEntryId is off the path", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		const ids = [];
		for (let i = 0; i < 6; i++) {
			ids.push(sm.appendMessage(user(words(12))));
			ids.push(sm.appendMessage(assistant(words(25))));
		}
		sm.appendMessage(assistant([toolCall("c1", "read", { path: "src/main.ts" }), toolCall("c2", "edit", { path: "README.md", oldText: "a", newText: "b" })]));
		sm.appendMessage(toolResult("c1", "read", "export {}", { details: { lines: 1 } }));
		sm.appendMessage(toolResult("c2", "edit", "ok", { details: { diff: "-a\n+b\n" } }));
		sm.appendCompaction(words(40), ids[7], 48213, { readFiles: ["src/main.ts"], modifiedFiles: ["README.md"] });
		const after = [];
		for (let i = 0; i < 4; i++) {
			after.push(sm.appendMessage(user(words(10))));
			after.push(sm.appendMessage(assistant(words(20))));
		}
		sm.appendCompaction(words(30), after[5], 61002, { artifactIndex: [1, 2, 3] }, true);
		sm.appendMessage(user(words(8)));
		sm.appendMessage(assistant(words(12)));
		sm.branch(ids[5]);
		sm.appendMessage(user("Another branch."));
		sm.appendMessage(assistant(words(9)));
		sm.appendCompaction("Third summary (firstKeptEntryId points off-path).", after[3], 1234);
		sm.appendMessage(user("After the third compaction."));
		sm.appendMessage(assistant(words(9)));
		return sm;
	});

	// 8. labels, session_info, custom entries (no custom_message here)
	scenario("labels-info-custom", "labels set, cleared (undefined and \"\"), session_info names incl. a clearing empty name, custom entries with and without data", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		const u1 = sm.appendMessage(user("Label me."));
		const a1 = sm.appendMessage(assistant(words(10)));
		sm.appendLabelChange(u1, "checkpoint-1");
		sm.appendLabelChange(a1, "good answer ⭐");
		const u2 = sm.appendMessage(user("More."));
		const a2 = sm.appendMessage(assistant(words(10)));
		sm.appendLabelChange(u1, undefined);
		sm.appendLabelChange(u2, "later");
		sm.appendLabelChange(u2, "");
		sm.appendLabelChange(a2, "final-label");
		sm.appendSessionInfo("First name");
		sm.appendSessionInfo("Second name");
		sm.appendCustomEntry("my-extension", { count: 42, nested: { list: [1, "two", null, true] } });
		sm.appendCustomEntry("no-data-extension");
		sm.appendMessage(user("After the custom entries."));
		sm.appendMessage(assistant(words(10)));
		sm.appendSessionInfo("   ");
		return sm;
	});

	// 9. custom_message entries (extension-injected context)
	scenario("custom-message-entries", "custom_message entries: string and block content (with an image), display true/false, details", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		sm.appendMessage(user("Hi."));
		sm.appendMessage(assistant(words(8)));
		sm.appendCustomMessageEntry("my-extension", "Injected context (string content)", true, { source: "ext" });
		sm.appendCustomMessageEntry("my-extension", [{ type: "text", text: "Hidden block content" }, { type: "image", data: PNG_8x8, mimeType: "image/png" }], false);
		sm.appendMessage(user("Did you see it?"));
		sm.appendMessage(assistant(words(8)));
		return sm;
	});

	// 10. unicode (valid UTF-16 only)
	const uni = "Emoji: 😀👍🏽👨‍👩‍👧‍👦 🇩🇪 — CJK: 漢字かなカナ — RTL: مرحبا שלום \u202Eevil\u202C — combining: e\u0301 (é) Å\u030A — ZWJ/ZWNJ: \u200D\u200C";
	scenario("unicode", "emoji (ZWJ, skin tone, flags), CJK, RTL and bidi controls, combining marks, U+2028/U+2029, NUL and C0 controls, BOM, NBSP, a 256 KiB line, unicode cwd and tool args", (dir) => {
		const sm = SessionManager.create("/home/dev/my project/ünïcödé — 日本語", dir);
		sm.appendMessage(user(uni));
		sm.appendMessage(assistant(`Echo: ${uni}`));
		sm.appendMessage(user("Line\u2028separator and paragraph\u2029separator, NEL\u0085, NBSP\u00a0, ideographic\u3000space."));
		sm.appendMessage(assistant("Controls: NUL\u0000 BEL\u0007 ESC\u001b[31mred\u001b[0m tab\t CR\r LF\n DEL\u007f BOM\ufeff."));
		sm.appendMessage(user(`Long: ${"αβγδε 😀 ".repeat(256 * 1024 / 16)}`));
		sm.appendMessage(assistant([toolCall("call_ü", "write", { "päth": "ünï/日本.txt", "content": "ﷺ 𝕏 \u2028", "n": 1e21, "neg": -0 })]));
		sm.appendMessage(toolResult("call_ü", "write", "wrote 3 graphemes"));
		sm.appendMessage(assistant("Done ✅"));
		sm.appendSessionInfo("Ünïcödé 🎉 session");
		return sm;
	});

	// 11. lone surrogates: JSON.stringify writes them as \ud83d escapes
	scenario("lone-surrogate", "text holding lone UTF-16 surrogates, which JSON.stringify writes as \\ud83d / \\ude00 escapes (not valid UTF-8 when decoded)", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		sm.appendMessage(user("Truncated emoji: \ud83d and a lone low \ude00 here."));
		sm.appendMessage(assistant("Saw them."));
		return sm;
	});

	// 12. forks
	const src = scenario("fork-source", "source session for the forks: a label entry sits in the middle of the path", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		const u1 = sm.appendMessage(user("Source session for forks."));
		sm.appendMessage(assistant(words(12)));
		sm.appendLabelChange(u1, "fork-point");
		sm.appendMessage(user("Second turn."));
		sm.appendMessage(assistant(words(12)));
		sm.appendMessage(user("Third turn."));
		sm.appendMessage(assistant(words(12)));
		return sm;
	});
	const srcFile = src.getSessionFile();
	const srcEntries = src.getEntries();
	const srcMsg = srcEntries.filter((e) => e.type === "message");

	scenario("fork-forkFrom", "SessionManager.forkFrom(source, otherCwd, dir): every entry copied verbatim under a new header with parentSession, then more turns", (dir) => {
		const sm = SessionManager.forkFrom(srcFile, "/home/dev/projects/other", dir);
		sm.appendMessage(user("Continuing in the fork."));
		sm.appendMessage(assistant(words(10)));
		return sm;
	});

	scenario("fork-createBranchedSession", "createBranchedSession(leaf) over a path holding a label entry: labels are dropped from the path and re-appended at the end, so the entry after the label names a parent that is not in the file", (dir) => {
		const sm = SessionManager.open(srcFile, dir);
		// Leaf: the 2nd assistant, whose path is u1, a1, label, u2, a2.
		sm.createBranchedSession(srcMsg[3].id);
		sm.appendMessage(user("Continuing in the branched session."));
		sm.appendMessage(assistant(words(10)));
		return sm;
	});

	scenario("fork-createBranchedSession-clean", "createBranchedSession(leaf) over a path without label entries (label target on the path): the label is re-created as the last entry", (dir) => {
		const sm = SessionManager.open(srcFile, dir);
		// Leaf: the 1st assistant; the label entry (its child) is not on the path but targets u1.
		sm.createBranchedSession(srcMsg[1].id);
		sm.appendMessage(user("Continuing."));
		sm.appendMessage(assistant(words(6)));
		return sm;
	});

	scenario("fork-createBranchedSession-no-assistant", "createBranchedSession(leaf) whose path has no assistant message: pi defers the file, which is never written", (dir) => {
		const sm = SessionManager.open(srcFile, dir);
		sm.createBranchedSession(srcMsg[0].id);
		return sm;
	});

	scenario("fork-newSession-parent", "newSession({parentSession}) on a fresh manager: an empty session whose header names the parent", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		sm.newSession({ parentSession: srcFile });
		sm.appendMessage(user("New session with a parentSession header."));
		sm.appendMessage(assistant(words(8)));
		return sm;
	});

	// 13. persistence rules
	scenario("no-assistant-not-persisted", "a session with user messages but no assistant message: pi writes no file", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		sm.appendModelChange("anthropic", "claude-sonnet-4-5");
		sm.appendMessage(user("Is anyone there?"));
		sm.appendMessage(user("Hello?"));
		return sm;
	});

	scenario("reopened-append", "a session closed and reopened with SessionManager.open, then continued: appends go after the last line", (dir) => {
		const first = SessionManager.create(CWD, dir);
		first.appendMessage(user("Before closing."));
		first.appendMessage(assistant(words(6)));
		const sm = SessionManager.open(first.getSessionFile());
		sm.appendMessage(user("After reopening."));
		sm.appendMessage(assistant(words(6)));
		return sm;
	});

	scenario("duplicate-header", "open() of an empty file writes a fresh header (flushed); the next user append un-flushes (no assistant yet) and the assistant append then re-appends the whole buffer: the file holds the header twice", (dir) => {
		fs.mkdirSync(dir, { recursive: true });
		const file = path.join(dir, "empty-then-used.jsonl");
		fs.writeFileSync(file, "");
		const sm = SessionManager.open(file, dir, CWD);
		sm.appendMessage(user("First message into a file that was empty."));
		sm.appendMessage(assistant(words(6)));
		return { sm, expect: { headerLines: fs.readFileSync(file, "utf8").split("\n").filter((l) => l.startsWith('{"type":"session"')).length } };
	});

	// 14. custom session id
	scenario("custom-session-id", "newSession({id: \"my-custom-session-id\"}): a header id that is not a UUID", (dir) => {
		const sm = SessionManager.create(CWD, dir);
		sm.newSession({ id: "my-custom-session-id" });
		sm.appendMessage(user("Custom session id."));
		sm.appendMessage(assistant(words(8)));
		return sm;
	});

	// 15. large
	scenario("large", `a large session: ${large} messages with tool calls and thinking`, (dir) => {
		const sm = SessionManager.create("/home/dev/projects/large", dir);
		sm.appendModelChange("anthropic", "claude-sonnet-4-5");
		sm.appendThinkingLevelChange("medium");
		let n = 0;
		let call = 0;
		while (n < large) {
			sm.appendMessage(user(words(15)));
			n++;
			if (n >= large) break;
			if (n % 7 === 3 && n + 2 < large) {
				const id = `call_${call++}`;
				sm.appendMessage(assistant([{ type: "thinking", thinking: words(10) }, toolCall(id, "bash", { command: `echo ${n}` })]));
				sm.appendMessage(toolResult(id, "bash", `${n}\n`, { details: { exitCode: 0 } }));
				n += 2;
				if (n >= large) break;
			}
			sm.appendMessage(assistant(words(30)));
			n++;
		}
		return { sm, expect: { messages: n } };
	});

	process.stdout.write(`${JSON.stringify({ piVersion: piVersion(), ...det, scenarios: results }, null, 1)}\n`);
}

// ---------------------------------------------------------------------------
// read
// ---------------------------------------------------------------------------

function describe(SessionManager, file, inPlace) {
	file = path.resolve(file);
	let target = file;
	let tmp;
	if (!inPlace) {
		// SessionManager.open REWRITES the file when it migrates a v1/v2 file and
		// TRUNCATES it to a fresh header when the first line is not a session
		// header, so read a copy.
		tmp = fs.mkdtempSync(path.join(os.tmpdir(), "pi-read-"));
		target = path.join(tmp, path.basename(file));
		fs.copyFileSync(file, target);
	}
	try {
		const before = fs.readFileSync(target);
		const sm = SessionManager.open(target, path.dirname(target));
		const after = fs.existsSync(target) ? fs.readFileSync(target) : null;
		const rewritten = after === null || !before.equals(after);
		const entries = sm.getEntries();
		const labels = {};
		for (const e of entries) {
			const l = sm.getLabel(e.id);
			if (l !== undefined) labels[e.id] = l;
		}
		return {
			piVersion: piVersion(),
			file,
			header: sm.getHeader(),
			sessionId: sm.getSessionId(),
			sessionName: sm.getSessionName() ?? null,
			leafId: sm.getLeafId(),
			entries: entries.map((e) => ({
				id: e.id,
				parentId: e.parentId ?? null,
				...(e.parentId === undefined ? { parentIdMissing: true } : {}),
				type: e.type,
				entry: e,
			})),
			roots: sm.getTree().map((n) => n.entry.id),
			labels,
			context: sm.buildSessionContext(),
			rewritten,
			...(rewritten ? { fileAfterOpen: after === null ? null : after.toString("utf8") } : {}),
		};
	} finally {
		if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
	}
}

async function read(files, opt, many) {
	applyDeterminism(opt, {});
	const { SessionManager } = await loadPi();
	if (many) {
		const out = files.map((f) => describe(SessionManager, f, false));
		process.stdout.write(`${JSON.stringify(out)}\n`);
	} else {
		process.stdout.write(`${JSON.stringify(describe(SessionManager, files[0], Boolean(opt["in-place"])))}\n`);
	}
}

// ---------------------------------------------------------------------------
// append
// ---------------------------------------------------------------------------

async function append(file, text, opt) {
	applyDeterminism(opt, {});
	const { SessionManager } = await loadPi();
	file = path.resolve(file);
	if (!fs.existsSync(file)) die(`no such file: ${file}`);
	const bytesBefore = fs.readFileSync(file);
	const sizeBefore = bytesBefore.length;
	let versionBefore = null;
	try {
		versionBefore = JSON.parse(bytesBefore.toString("utf8").split("\n", 1)[0]).version ?? 1;
	} catch {
		versionBefore = null;
	}
	// pi 0.73.1 takes no lock on a session file (see NOTES.md): neither do we.
	const sm = SessionManager.open(file);
	const bytesAfterOpen = fs.readFileSync(file);
	const sizeAfterOpen = bytesAfterOpen.length;
	const parentId = sm.getLeafId();
	const id = sm.appendMessage({ role: "user", content: text, timestamp: Date.now() });
	const sizeAfter = fs.statSync(file).size;
	process.stdout.write(
		`${JSON.stringify({
			file,
			id,
			parentId,
			versionBefore,
			rewrittenOnOpen: !bytesBefore.equals(bytesAfterOpen),
			sizeAfterOpen,
			written: sizeAfter > sizeAfterOpen,
			sizeBefore,
			sizeAfter,
		})}\n`,
	);
}

// ---------------------------------------------------------------------------
// write-legacy: v1 and v2 files written by hand (pi's older formats)
// ---------------------------------------------------------------------------

function writeLegacy(outdir) {
	outdir = path.resolve(outdir);
	fs.mkdirSync(outdir, { recursive: true });
	const files = [];
	const T = (s) => `2025-06-01T10:00:${String(s).padStart(2, "0")}.000Z`;
	const ms = (s) => Date.parse(T(s));
	const U = (s, content) => ({ role: "user", content, timestamp: ms(s) });
	const A = (s, text, extra = {}) => ({
		role: "assistant",
		content: [{ type: "text", text }],
		api: "anthropic-messages",
		provider: "anthropic",
		model: "claude-sonnet-4-5",
		usage: USAGE(),
		stopReason: "stop",
		timestamp: ms(s),
		...extra,
	});
	const line = (o) => JSON.stringify(o);
	const write = (name, version, description, lines, { eol = "\n", trailing = true } = {}) => {
		const p = path.join(outdir, `${name}.jsonl`);
		const body = lines.join(eol) + (trailing ? eol : "");
		fs.writeFileSync(p, body);
		files.push({ name, path: p, version, description, lines: lines.length });
	};
	// v1 header, as pi < 0.31 wrote it (no version member; model and thinking level in the header).
	const v1Header = (id, extra = {}) => ({
		type: "session",
		id,
		timestamp: T(0),
		cwd: "/home/dev/projects/legacy",
		provider: "anthropic",
		modelId: "claude-sonnet-4-5",
		thinkingLevel: "off",
		...extra,
	});
	const msg = (s, message) => ({ type: "message", timestamp: T(s), message });

	write("v1-basic", 1, "v1: no version, no ids; messages, thinking level and model changes", [
		line(v1Header("4f1d6a3c-0b7e-4c1a-9a51-2f7c0e4b8d11")),
		line(msg(1, U(1, "Hello from pi v1."))),
		line(msg(2, A(2, "Hi! This is a v1 session."))),
		line({ type: "thinking_level_change", timestamp: T(3), thinkingLevel: "high" }),
		line({ type: "model_change", timestamp: T(4), provider: "openai", modelId: "gpt-4o" }),
		line(msg(5, U(5, [{ type: "text", text: "Block content." }]))),
		line(msg(6, A(6, "Still v1.", { api: "openai-completions", provider: "openai", model: "gpt-4o" }))),
	]);

	write("v1-version1", 1, "v1 with an explicit \"version\":1 in the header", [
		line({ type: "session", version: 1, id: "6b0c2d1e-5a4f-4e3d-8c2b-1a0f9e8d7c6b", timestamp: T(0), cwd: "/home/dev/projects/legacy" }),
		line(msg(1, U(1, "Explicit version 1."))),
		line(msg(2, A(2, "Noted."))),
	]);

	// firstKeptEntryIndex indexes the file's lines, header included (line 0).
	write("v1-compaction", 1, "v1 compaction with firstKeptEntryIndex (an index into the file's entries, header = 0) pointing back at line 3", [
		line(v1Header("a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d")),
		line(msg(1, U(1, "First question."))),
		line(msg(2, A(2, "First answer."))),
		line(msg(3, U(3, "Second question."))),
		line(msg(4, A(4, "Second answer."))),
		line({ type: "compaction", timestamp: T(5), summary: "The user asked two questions.", firstKeptEntryIndex: 3, tokensBefore: 12000 }),
		line(msg(6, U(6, "After compaction."))),
		line(msg(7, A(7, "Continuing."))),
	]);

	write("v1-compaction-edge", 1, "v1 compactions whose firstKeptEntryIndex is the header (0), a later entry, out of range, and not a number", [
		line(v1Header("0c9f8e7d-6b5a-4c3d-9e2f-1a0b9c8d7e6f")),
		line(msg(1, U(1, "Q1"))),
		line(msg(2, A(2, "A1"))),
		line({ type: "compaction", timestamp: T(3), summary: "Index 0 is the header.", firstKeptEntryIndex: 0, tokensBefore: 1 }),
		line({ type: "compaction", timestamp: T(4), summary: "Index 6 is a later entry.", firstKeptEntryIndex: 6, tokensBefore: 2 }),
		line({ type: "compaction", timestamp: T(5), summary: "Index 99 is out of range.", firstKeptEntryIndex: 99, tokensBefore: 3 }),
		line(msg(6, U(6, "Q2"))),
		line({ type: "compaction", timestamp: T(7), summary: "Index is a string.", firstKeptEntryIndex: "2", tokensBefore: 4 }),
		line(msg(8, A(8, "A2"))),
	]);

	write("v1-branched", 1, "v1 session made by the old /branch: header carries branchedFrom; a checkpoint entry (type unknown to v3)", [
		line(v1Header("9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b", { branchedFrom: "/home/dev/.pi/agent/sessions/--home-dev-projects-legacy--/2025-06-01T09-00-00-000Z_4f1d6a3c-0b7e-4c1a-9a51-2f7c0e4b8d11.jsonl" })),
		line(msg(1, U(1, "Branched."))),
		line(msg(2, A(2, "From an older session."))),
		line({ type: "checkpoint", timestamp: T(3), checkpointId: "2f1e0d9c-8b7a-4f6e-9d5c-4b3a2f1e0d9c" }),
		line(msg(4, U(4, "After the checkpoint."))),
		line(msg(5, A(5, "OK."))),
	]);

	write("v1-messy", 1, "v1 with CRLF line ends, a blank line, a malformed line and no final newline (pi drops the malformed line and the CRs when it rewrites)", [
		line(v1Header("5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a")),
		line(msg(1, U(1, "CRLF line."))),
		"",
		"{\"type\":\"message\",\"timestamp\":\"broken",
		line(msg(2, A(2, "After the broken line."))),
	], { eol: "\r\n", trailing: false });

	// v2: ids and parents, header version 2, message role hookMessage.
	const v2Header = { type: "session", version: 2, id: "7c6b5a4f-3e2d-4c1b-8a9f-8e7d6c5b4a3f", timestamp: T(0), cwd: "/home/dev/projects/legacy" };
	write("v2-hookmessage", 2, "v2: tree with a branch, hookMessage-role messages (string and block content), a custom_message entry and a label", [
		line(v2Header),
		line({ type: "message", id: "aa000001", parentId: null, timestamp: T(1), message: U(1, "Hello v2.") }),
		line({ type: "message", id: "aa000002", parentId: "aa000001", timestamp: T(2), message: A(2, "Hi.") }),
		line({ type: "message", id: "aa000003", parentId: "aa000002", timestamp: T(3), message: { role: "hookMessage", customType: "my-hook", content: "Injected by a hook.", display: true, timestamp: ms(3) } }),
		line({ type: "message", id: "aa000004", parentId: "aa000003", timestamp: T(4), message: U(4, "Continue.") }),
		line({ type: "message", id: "aa000005", parentId: "aa000004", timestamp: T(5), message: A(5, "Continuing.") }),
		line({ type: "message", id: "aa000006", parentId: "aa000002", timestamp: T(6), message: { role: "hookMessage", customType: "my-hook", content: [{ type: "text", text: "Block hook content." }], display: false, details: { n: 1 }, timestamp: ms(6) } }),
		line({ type: "custom_message", id: "aa000007", parentId: "aa000006", timestamp: T(7), customType: "my-hook", content: "custom_message entries already existed in v2", display: true }),
		line({ type: "label", id: "aa000008", parentId: "aa000007", timestamp: T(8), targetId: "aa000001", label: "start" }),
		line({ type: "message", id: "aa000009", parentId: "aa000008", timestamp: T(9), message: U(9, "On the branch.") }),
		line({ type: "message", id: "aa00000a", parentId: "aa000009", timestamp: T(10), message: A(10, "Yes.") }),
	]);

	write("v2-plain", 2, "v2 without hookMessage: pi only bumps the header version", [
		line({ ...v2Header, id: "3e2d1c0b-9a8f-4e7d-8c6b-5a4f3e2d1c0b", parentSession: "/home/dev/.pi/agent/sessions/--home-dev-projects-legacy--/x.jsonl" }),
		line({ type: "model_change", id: "bb000001", parentId: null, timestamp: T(1), provider: "anthropic", modelId: "claude-sonnet-4-5" }),
		line({ type: "message", id: "bb000002", parentId: "bb000001", timestamp: T(2), message: U(2, "Plain v2.") }),
		line({ type: "message", id: "bb000003", parentId: "bb000002", timestamp: T(3), message: A(3, "Indeed.") }),
		line({ type: "compaction", id: "bb000004", parentId: "bb000003", timestamp: T(4), summary: "Short.", firstKeptEntryId: "bb000002", tokensBefore: 10 }),
	]);

	process.stdout.write(`${JSON.stringify(files, null, 1)}\n`);
}

// ---------------------------------------------------------------------------
// version
// ---------------------------------------------------------------------------

async function version() {
	const sm = await loadPi();
	const pub = await import(pathToFileURL(path.join(PKG_DIR, "dist", "index.js")).href);
	process.stdout.write(
		`${JSON.stringify({
			piVersion: piVersion(),
			node: process.version,
			sameAsPublicExport: pub.SessionManager === sm.SessionManager && pub.buildSessionContext === sm.buildSessionContext,
			currentSessionVersion: sm.CURRENT_SESSION_VERSION,
		})}\n`,
	);
}

// ---------------------------------------------------------------------------

async function main() {
	const [cmd, ...rest] = process.argv.slice(2);
	const { pos, opt } = parseArgs(rest);
	ensureAgentDir();
	switch (cmd) {
		case "generate":
			if (pos.length !== 1) die("usage: generate <outdir> [--large N] [--seed S|random] [--clock ISO|real]");
			return generate(pos[0], opt);
		case "read":
			if (pos.length !== 1) die("usage: read <file> [--in-place] [--seed S] [--clock ISO]");
			return read(pos, opt, false);
		case "read-many":
			if (pos.length < 1) die("usage: read-many <file>... [--seed S] [--clock ISO]");
			return read(pos, opt, true);
		case "append":
			if (pos.length !== 2) die("usage: append <file> <text> [--seed S] [--clock ISO]");
			return append(pos[0], pos[1], opt);
		case "write-legacy":
			if (pos.length !== 1) die("usage: write-legacy <outdir>");
			return writeLegacy(pos[0]);
		case "version":
			return version();
		default:
			die(`unknown subcommand ${cmd ?? "(none)"}: generate | read | read-many | append | write-legacy | version`);
	}
}

main().catch((err) => {
	process.stderr.write(`pi-driver: ${err?.stack ?? err}\n`);
	process.exit(1);
});
