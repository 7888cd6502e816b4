// Drives the Pi extension (pi-extension/index.ts) the way Pi does, without Pi: it loads the file
// with Pi's own loader (jiti, `typebox` aliased as Pi aliases it), hands the factory a stand-in
// ExtensionAPI that records the registered tools and handlers, and calls a tool's `execute()`
// with a stand-in context, so a call goes through the extension's real connection to a real
// `threadbase serve`. Used by tests/it/extension.rs and benches/serve.rs (the `extension/*` rows).
//
// Run with the Node of tools/pi: `node extension_driver.mjs <tools/pi dir> <index.ts>`. The
// extension reads THREADBASE_BIN, THREADBASE_DB, ... from this process's environment.
//
// One JSON request per line on stdin, one JSON answer per line on stdout:
// - {"op":"load","session":{"file","id","cwd","entries"?,"ui"?}}: a fresh extension instance (the previous one, if
//   any, gets `session_shutdown` first) for that session; answers {"tools":[names]}. With "ui": true
//   the context has a UI (`hasUI`, and a `ui.setStatus` that records each call).
// - {"op":"call","tool","params"}: one execute(); answers {"result","aliased"} (aliased: whether
//   details.snapshots is the same array as details.threads; null without snapshots) or
//   {"error","code"}.
// - {"op":"time","tool","params":[…],"count"}: `count` execute() calls one after another, cycling
//   through `params`, each timed from the call to its parsed result; answers {"ns":[…]}.
// - {"op":"first","tool","params","count","session"}: `count` times: a fresh instance, its first
//   call timed (it starts serve), then shutdown and a pause for that serve to exit; {"ns":[…]}.
// - {"op":"lines","bytes","chunk"}: feeds the extension's LineReader one line of `bytes` bytes
//   (a JSON string) in chunks of `chunk` bytes, then LF; answers {"scanned","lines","length"}.
// - {"op":"split","text","chunk"}: feeds the LineReader `text`'s UTF-8 bytes in chunks of
//   `chunk` bytes; answers {"lines","scanned"}.
// - {"op":"statuses"}: the current instance's `ui.setStatus` calls so far, {"statuses":[{key,text}]}
//   (`text` null for undefined).
// - {"op":"shutdown"}: `session_shutdown` for the current instance; answers {"statuses"} (its
//   `ui.setStatus` calls, the ones the shutdown made included).
import { createRequire } from "node:module";
import { createInterface } from "node:readline";
import { join } from "node:path";

const [toolsDir, extensionPath] = process.argv.slice(2);
if (!toolsDir || !extensionPath) {
	process.stderr.write("usage: node extension_driver.mjs <tools/pi dir> <index.ts>\n");
	process.exit(2);
}
const requireTools = createRequire(join(toolsDir, "package.json"));
const { createJiti } = requireTools("jiti");
const jiti = createJiti(import.meta.url, {
	alias: { typebox: requireTools.resolve("typebox") },
	moduleCache: false,
	fsCache: false,
});
const mod = await jiti.import(extensionPath);

let current = undefined;

function instance(session) {
	const tools = new Map();
	const handlers = new Map();
	const notices = [];
	const statuses = [];
	const pi = {
		registerTool: (t) => tools.set(t.name, t),
		registerCommand: () => {},
		on: (event, fn) => {
			if (!handlers.has(event)) handlers.set(event, []);
			handlers.get(event).push(fn);
		},
		sendMessage: (m) => notices.push(m),
	};
	mod.default(pi);
	const ctx = {
		cwd: session.cwd,
		hasUI: session.ui === true,
		ui: session.ui === true ? { setStatus: (key, text) => statuses.push({ key, text: text ?? null }) } : {},
		sessionManager: {
			getSessionFile: () => session.file ?? undefined,
			getSessionId: () => session.id,
			// Only when the test gives the session's entries (Pi's sessionManager.getEntries()).
			...(Array.isArray(session.entries) ? { getEntries: () => session.entries } : {}),
		},
	};
	return { tools, handlers, ctx, notices, statuses };
}

async function shutdown() {
	if (!current) return [];
	for (const fn of current.handlers.get("session_shutdown") ?? []) await fn({}, current.ctx);
	const statuses = current.statuses;
	current = undefined;
	return statuses;
}

async function execute(inst, tool, params) {
	const t = inst.tools.get(tool);
	if (!t) throw new Error(`no tool ${tool}`);
	return t.execute("call", params, undefined, undefined, inst.ctx);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function handle(req) {
	switch (req.op) {
		case "load": {
			await shutdown();
			current = instance(req.session);
			return { tools: [...current.tools.keys()] };
		}
		case "call": {
			try {
				const result = await execute(current, req.tool, req.params);
				const d = result?.details;
				// Whether `snapshots` is the very array `threads` is (as pi-threads builds it).
				const aliased = d && typeof d === "object" && "snapshots" in d ? d.snapshots === d.threads : null;
				return { result, aliased };
			} catch (e) {
				return { error: e instanceof Error ? e.message : String(e), code: e?.code ?? null };
			}
		}
		case "time": {
			const list = Array.isArray(req.params) ? req.params : [req.params];
			const ns = [];
			for (let i = 0; i < req.count; i++) {
				const t0 = process.hrtime.bigint();
				await execute(current, req.tool, list[i % list.length]);
				ns.push(Number(process.hrtime.bigint() - t0));
			}
			return { ns };
		}
		case "first": {
			const ns = [];
			for (let i = 0; i < req.count; i++) {
				await shutdown();
				await sleep(150);
				current = instance(req.session);
				const t0 = process.hrtime.bigint();
				await execute(current, req.tool, req.params);
				ns.push(Number(process.hrtime.bigint() - t0));
			}
			await shutdown();
			await sleep(150);
			return { ns };
		}
		case "lines": {
			const got = [];
			const reader = new mod.LineReader((line) => got.push(line.length));
			const chunk = Buffer.alloc(req.chunk, 0x61);
			let left = req.bytes;
			reader.push(Buffer.from('"'));
			left -= 2;
			while (left > 0) {
				const n = Math.min(left, req.chunk);
				reader.push(n === req.chunk ? chunk : chunk.subarray(0, n));
				left -= n;
			}
			reader.push(Buffer.from('"\n'));
			return { scanned: reader.scanned, lines: got.length, length: got[0] ?? null };
		}
		case "split": {
			const got = [];
			const reader = new mod.LineReader((line) => got.push(line));
			const bytes = Buffer.from(req.text, "utf8");
			for (let i = 0; i < bytes.length; i += req.chunk) reader.push(bytes.subarray(i, i + req.chunk));
			return { lines: got, scanned: reader.scanned };
		}
		case "statuses": {
			return { statuses: current?.statuses ?? [] };
		}
		case "shutdown": {
			return { statuses: await shutdown() };
		}
		default:
			throw new Error(`unknown op ${req.op}`);
	}
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
	if (!line.trim()) continue;
	let answer;
	try {
		answer = await handle(JSON.parse(line));
	} catch (e) {
		answer = { fatal: e instanceof Error ? `${e.message}\n${e.stack}` : String(e) };
	}
	process.stdout.write(`${JSON.stringify(answer)}\n`);
}
await shutdown();
