/**
 * threadbase Pi extension: registers the pi-threads `thread` tool and forwards every call to a
 * `threadbase serve` process that owns this session's background Pi children.
 *
 * - The server is started lazily, on the first `thread` call of a session runtime, with
 *   `--session-file`, `--session-id`, `--cwd` and `--parent-args` describing this Pi session, and
 *   it inherits this process's environment (THREADBASE_DB, THREADBASE_PI_COMMAND, PI_THREADS_*,
 *   PI_CODING_AGENT_DIR, ...).
 * - Protocol (threadbase's `serve` interface): one JSON object per line, LF only.
 *   Request `{"id": n, "method": "thread", "params": {...}}`; response `{"id": n, "result":
 *   {content, details}}` or `{"id": n, "error": {code, message}}`; notification
 *   `{"method": "progress", "params": {"requestId": n, "details": {...}}}` while a `wait` runs.
 *   Serve runs with `--wire compact`: a list's threads cross the pipe once, in part lines before
 *   the response line, and `withAliases` puts them in `details.threads` and `details.snapshots`
 *   (the same array); lines are split by `LineReader`, in time linear in the bytes.
 * - Spend (issue 28): serve runs with `--report-usage`; its `usage` notifications (the children's
 *   spend, each token once) go on the next tool result as Pi 1.6's `usage`, which Pi adds to the
 *   session's totals (footer, `get_session_stats`); the session's own spend, added up from its
 *   entries, goes to serve as `session_usage` before each tool call and after each turn.
 * - Status line (issue 45): in a session with a UI that is the top of its tree, serve runs with
 *   `--report-status`; each `status` notification (the tree's threads by condition and its
 *   spend, sent when it changes) becomes `ctx.ui.setStatus("threadbase", text)`, shown in Pi's
 *   footer (`undefined`, which removes the entry, when there is nothing to show or no serve).
 * - Supervision (issue 46): while serve's row watcher has no database connection, a
 *   `supervision` notification (`{"method": "supervision", "params": {"requestId", "running":
 *   false, "since", "reason", "parts", "text"}}`) precedes each answer; its text is added to that
 *   tool result as a last text block (to an error's message), so the session sees it.
 * - `session_shutdown` closes the server's stdin: the server stops its live children gracefully,
 *   records their exits and exits 0. Pi runs this factory again for every new session runtime
 *   (new, switch, fork, clone, reload), so the next session gets its own server.
 *
 * Configuration (environment of the Pi process):
 * - THREADBASE_BIN      the threadbase executable. Without it: the binary recorded by
 *                       `threadbase pi install` (threadbase.json beside this file), else
 *                       `threadbase` on PATH, else ~/.cargo/bin/threadbase;
 * - THREADBASE_DB       the database (serve reads it from its environment, never from `--db`,
 *                       so a URL's password is in no argv `ps` shows; default: serve's own
 *                       default, $PI_CODING_AGENT_DIR/threadbase.sqlite, else
 *                       ~/.pi/agent/threadbase.sqlite);
 * - THREADBASE_TRUSTED  `1` adds `--trusted` (children inside this cwd get `--approve`);
 * - THREADBASE_TOOLS    which contracts' tools to register, comma-separated: `thread` (the
 *                       default: the pi-threads `thread` tool) and `worker` (the `threads_*`
 *                       worker tools: threads_spawn, threads_list, threads_send,
 *                       threads_interrupt, threads_hide, threads_report) and `agent` (the
 *                       subagent lifecycle: agent_spawn, agent_wait, agent_steer,
 *                       agent_status, agent_update, agent_pause, agent_stop, agent_output).
 *                       With `agent`, the server starts at session start (not lazily) so
 *                       notices saved for this agent while it was not running arrive at once;
 *                       children inherit the variable, so they get the same tools.
 *
 * `/threads` (a registered command): browses this session's threads with Pi's dialogs (select,
 * confirm, notify) over the same serve connection: list (per level, via `parent`), poll summary,
 * refresh, children, and stop after a confirmation. No start/send (contract's command boundary).
 *
 * Notices (`{"method": "notice", ...}`: a `thread` child that finished its turn, exited,
 * failed, was stopped by anyone but this session's own `stop`, or was closed as stale; a
 * worker's report for its coordinator; other mailbox messages due to this session) are
 * delivered into the session as a custom message that does not start a turn: the person sees
 * it in the TUI, the model on its next turn. `THREADBASE_NOTICES=off` turns the `thread` tool's
 * off. A session that has used the `thread` tool starts its serve at session start, so notices
 * saved while it was away arrive at once.
 *
 * No dependencies beyond what Pi provides (`typebox` and Node built-ins); Pi loads this file
 * with jiti, so no build step is needed.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants as fsConstants, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

const TOOL_NAME = "thread";
const TOOL_DESCRIPTION = [
	"Start and manage background Pi child sessions (threads). Each thread is its own Pi process and session that keeps working while you do; children do not see this conversation, so give them everything they need.",
	"Actions (one per call, field `action`):",
	"- start {prompt, name?, taskName?, args?, cwd?}: launch a child and send it the prompt verbatim; returns its id and path (/root/<taskName>).",
	"- wait {id, timeoutMs? (default 30000, max 600000), detail?}: block until the thread is idle or closed; a timeout never stops it.",
	"- poll {id, detail?}: look at a thread now. detail: summary (default), tail (the output tail with line breaks), full (the whole retained answer).",
	"- send {id, message, mode?}: message a live thread; mode prompt (idle), steer (interrupt the current turn) or follow_up (queue after it).",
	"- stop {id, force?}: end a live thread (graceful; force kills at once). Its session is kept.",
	"- resume {id}: relaunch a closed thread on its saved session (same id and path, no new prompt); fork {id?, entryId?, position?, name?, taskName?}: branch a thread's (or, without id, this) session into a new thread.",
	"- list {state?: all|live|closed, visibility?: active|archived|all, parent? | ancestor?}: this session's threads; with parent or ancestor also the threads your threads started (their children, grandchildren, …); archive {id, archived?}: hide a closed thread from lists.",
	"id accepts a thread id (thread_0123456789ab), a path (/root/task or task/sub), or a unique task name, for your threads and the threads below them (e.g. task/sub for a thread your thread task started).",
].join("\n");
const PROMPT_SNIPPET = "run background Pi child sessions (start, wait, poll, send, stop, resume, fork, list, archive)";
const PROMPT_GUIDELINES = [
	"Use thread start for independent work that can run in the background; the child does not see this conversation, so put the whole task and its context in the prompt.",
	"After starting threads, use thread wait (not repeated polls) to block until a thread is idle; a wait that times out leaves the thread running, so wait again or poll later.",
	"Answers are shortened at the default summary detail; when a result says it was truncated, poll with detail \"full\" to read the whole answer.",
	"Stop threads you no longer need; resume a closed thread to continue it with its history, or fork it to try another direction.",
];
const ACTIONS = ["start", "list", "poll", "send", "stop", "wait", "resume", "fork", "archive"] as const;
/** Bytes of the server's stderr kept for error messages. */
const STDERR_TAIL_BYTES = 4000;

type Action = (typeof ACTIONS)[number];

/** A string enum as plain JSON Schema (`{type: "string", enum: [...]}`), which every provider accepts. */
function stringEnum<T extends readonly string[]>(values: T, description: string) {
	return Type.Unsafe<T[number]>({ type: "string", enum: [...values], description });
}

/**
 * Flat on purpose: `action` plus every other field optional. `threadbase serve` validates each
 * action strictly (fields that do not belong to the action are rejected with a `Repair:` hint).
 */
const ThreadParams = Type.Object({
	action: stringEnum(ACTIONS, "The operation: start, list, poll, send, stop, wait, resume, fork or archive."),
	prompt: Type.Optional(Type.String({ description: "start: the prompt sent verbatim to the child (include all needed context)." })),
	name: Type.Optional(Type.String({ description: "start/fork: display name." })),
	taskName: Type.Optional(
		Type.String({ description: "start/fork: stable final path segment, matching ^[a-z0-9][a-z0-9_]{0,63}$." }),
	),
	args: Type.Optional(
		Type.Array(Type.String(), {
			description: "start/fork: allowlisted Pi CLI narrowing flags, e.g. [\"--model\", \"provider/id\"].",
		}),
	),
	cwd: Type.Optional(Type.String({ description: "start: child working directory, relative to the parent cwd." })),
	state: Type.Optional(stringEnum(["all", "live", "closed"] as const, "list: filter by state (default all).")),
	visibility: Type.Optional(
		stringEnum(["active", "archived", "all"] as const, "list: filter by archive state (default active)."),
	),
	parent: Type.Optional(Type.String({ description: "list: only direct children of this path/reference (. or self: the current thread)." })),
	ancestor: Type.Optional(Type.String({ description: "list: all descendants below this path/reference." })),
	id: Type.Optional(
		Type.String({ description: "A thread reference: thread id, canonical path (/root/x), relative path, or task name." }),
	),
	detail: Type.Optional(stringEnum(["summary", "tail", "full"] as const, "poll/wait: detail level (default summary).")),
	message: Type.Optional(Type.String({ description: "send: the message for the live thread." })),
	mode: Type.Optional(
		stringEnum(["prompt", "steer", "follow_up"] as const, "send: delivery mode (default prompt when idle, follow_up when busy)."),
	),
	force: Type.Optional(Type.Boolean({ description: "stop: kill at once instead of a graceful stop." })),
	timeoutMs: Type.Optional(Type.Integer({ description: "wait: integer 0..600000 ms (default 30000)." })),
	entryId: Type.Optional(Type.String({ description: "fork: the session entry to fork from (default the leaf)." })),
	position: Type.Optional(stringEnum(["at", "before"] as const, "fork: branch at the entry (default) or before it.")),
	archived: Type.Optional(Type.Boolean({ description: "archive: false to unarchive (default true)." })),
});

type ToolResult = {
	content: Array<{ type: "text"; text: string }>;
	details: unknown;
	terminate?: boolean;
	/** Pi 1.6: spend of this tool call, added to the session's totals (see `addUsage`). */
	usage?: PiUsage;
};
type Progress = (update: ToolResult) => void;

interface Pending {
	resolve: (result: ToolResult) => void;
	reject: (error: Error) => void;
	onProgress?: (details: unknown) => void;
	/** A list's snapshots so far, from its part lines (see withAliases). */
	parts?: unknown[];
	/** The `supervision` note serve sent before this answer (it is degraded: issue 46). */
	supervision?: string;
}

interface ServeIdentity {
	sessionFile: string | undefined;
	sessionId: string;
	cwd: string;
	/** Where the tree's status line goes (see `statusUiOf`); none: serve sends no status. */
	statusUi?: StatusUi;
}

/** What the status line needs of Pi's extension UI (`ctx.ui`). */
interface StatusUi {
	setStatus(key: string, text: string | undefined): void;
}

/** The key of the status entry this extension keeps in Pi's footer. */
export const STATUS_KEY = "threadbase";

/**
 * `status` notification params (serve's `--report-status`): the status line of this session's
 * whole tree (`threads: 2 busy · 1 asking · 1 failed · $0.42`; `""` when there is nothing to
 * show), the counts by condition (a live thread's attention word, else its phase; closed
 * threads only as `failed`; zeros left out), and what the tree spent.
 */
export interface StatusParams {
	text: string;
	counts: Record<string, number>;
	costUsd: number;
	tokens: number;
}

/** The text a `status` notification puts in the footer; `undefined` clears the entry. */
export function statusText(params: Partial<StatusParams> | undefined): string | undefined {
	const text = params?.text;
	return typeof text === "string" && text.trim() !== "" ? text : undefined;
}

/**
 * The UI the status line goes to: this session's, when it has one (interactive, or an RPC host
 * that shows `setStatus`) and it is the top of its tree (a child Pi's tree is its root
 * session's to show, and children run without a person watching).
 */
function statusUiOf(ctx: any): StatusUi | undefined {
	const managed = (process.env.PI_THREADS_SELF_ID ?? "").trim() !== "" || Number(process.env.PI_THREADS_DEPTH ?? 0) > 0;
	if (managed || !ctx?.hasUI) return undefined;
	const ui = ctx.ui;
	return typeof ui?.setStatus === "function" ? ui : undefined;
}

function envFlag(name: string): boolean {
	const v = (process.env[name] ?? "").trim().toLowerCase();
	return v === "1" || v === "true" || v === "yes";
}

/** This file's folder (where `threadbase pi install` writes threadbase.json). */
function extensionDir(): string | undefined {
	try {
		return dirname(fileURLToPath(import.meta.url));
	} catch {
		return typeof __dirname === "string" ? __dirname : undefined;
	}
}

function isExecutable(path: string): boolean {
	try {
		accessSync(path, fsConstants.X_OK);
		return true;
	} catch {
		return false;
	}
}

/**
 * The threadbase binary, first match wins: THREADBASE_BIN; the binary recorded by `threadbase pi
 * install` in threadbase.json beside this file; `threadbase` on PATH; ~/.cargo/bin/threadbase
 * (where `cargo install` puts it). Throws, saying what to run, when none is there.
 */
export function findThreadbase(): string {
	const explicit = process.env.THREADBASE_BIN?.trim();
	if (explicit) return explicit;
	const tried: string[] = [];
	const dir = extensionDir();
	if (dir) {
		const record = join(dir, "threadbase.json");
		try {
			const bin = JSON.parse(readFileSync(record, "utf8"))?.bin;
			if (typeof bin === "string" && bin) {
				if (isExecutable(bin)) return bin;
				tried.push(`${bin} (recorded in ${record}; not an executable file)`);
			}
		} catch {
			// not installed by `threadbase pi install`
		}
	}
	for (const d of (process.env.PATH ?? "").split(delimiter)) {
		if (d && isExecutable(join(d, "threadbase"))) return join(d, "threadbase");
	}
	tried.push("threadbase on PATH");
	const cargo = join(process.env.CARGO_HOME?.trim() || join(homedir(), ".cargo"), "bin", "threadbase");
	if (isExecutable(cargo)) return cargo;
	tried.push(cargo);
	throw new Error(
		`Cannot find the threadbase binary (tried ${tried.join(", ")}). Repair: in a threadbase checkout run \`cargo install --locked --path .\` and then \`threadbase pi install\`, or set THREADBASE_BIN to the binary's path.`,
	);
}

/**
 * The argv and environment of `threadbase serve` for this session. The database goes in the
 * environment (THREADBASE_DB, trimmed), never in argv: a `postgres://` URL may hold a password,
 * and every user of the host can read a process's argv (`ps`), only its owner its environment.
 */
function serveArgv(identity: ServeIdentity): { bin: string; args: string[]; env: NodeJS.ProcessEnv } {
	const bin = findThreadbase();
	const args: string[] = [];
	const env: NodeJS.ProcessEnv = { ...process.env };
	const db = process.env.THREADBASE_DB?.trim();
	if (db) env.THREADBASE_DB = db;
	else delete env.THREADBASE_DB;
	args.push("serve");
	if (identity.sessionFile) args.push("--session-file", identity.sessionFile);
	args.push("--session-id", identity.sessionId, "--cwd", identity.cwd);
	args.push("--parent-args", JSON.stringify(process.argv.slice(2)));
	if (envFlag("THREADBASE_TRUSTED")) args.push("--trusted");
	// Results without what this file rebuilds (a list's `details.snapshots`: see withAliases).
	args.push("--wire", "compact");
	// `usage` notifications: the children's spend, for the tool results (see addUsage).
	args.push("--report-usage");
	// `status` notifications: the tree's status line, for Pi's footer (see StatusParams).
	if (identity.statusUi) args.push("--report-status");
	return { bin, args, env };
}

/**
 * Splits serve's stdout into LF-terminated lines, in time linear in the bytes received (a list
 * of all threads can be a line of tens of MB, read in 64 KiB chunks): each byte is searched for
 * LF once, as part of the chunk it came in; the pieces of an unfinished line are kept as a list
 * and joined once, when its LF arrives; and a line is decoded from UTF-8 once, whole (so a
 * character split across chunks is never cut). A trailing CR is dropped.
 */
export class LineReader {
	private readonly onLine: (line: string) => void;
	private pieces: Buffer[] = [];
	private pieceBytes = 0;
	/** Bytes searched for LF so far: each received byte once. */
	scanned = 0;

	constructor(onLine: (line: string) => void) {
		this.onLine = onLine;
	}

	push(chunk: Buffer): void {
		let start = 0;
		for (;;) {
			const nl = chunk.indexOf(10, start);
			if (nl < 0) {
				this.scanned += chunk.length - start;
				break;
			}
			this.scanned += nl + 1 - start;
			let line = chunk.subarray(start, nl);
			if (this.pieces.length > 0) {
				this.pieces.push(line);
				line = Buffer.concat(this.pieces, this.pieceBytes + line.length);
				this.pieces = [];
				this.pieceBytes = 0;
			}
			start = nl + 1;
			const end = line.length > 0 && line[line.length - 1] === 13 ? line.length - 1 : line.length;
			this.onLine(line.toString("utf8", 0, end));
		}
		if (start < chunk.length) {
			const rest = chunk.subarray(start);
			this.pieces.push(rest);
			this.pieceBytes += rest.length;
		}
	}
}

/**
 * A `thread` list's details as pi-threads builds them. Serve (`--wire compact`) sends the list
 * once, in part lines (`{"id", "part": [snapshot, …]}`, each under 64 KiB, so Node never makes
 * a string in its large-object space) before the response line, whose `threads` and
 * `snapshots` are the placeholder `0`; and each listed snapshot's `resultSummary`, which is its
 * `result.text`, as `0` too. `threads` becomes the parts' snapshots in order (`parts`, what the
 * part lines carried), `snapshots` the very same array, and each `resultSummary` its text, all
 * set in place (so every key keeps its position). Every other result is returned as it came.
 */
export function withAliases(details: any, parts: unknown[] = []): any {
	if (!details || details.kind !== "listed" || details.snapshots !== 0) {
		return details;
	}
	if (details.threads === 0) details.threads = parts;
	if (!Array.isArray(details.threads)) return details;
	for (const snap of details.threads) {
		if (snap && snap.resultSummary === 0 && typeof snap.result?.text === "string") {
			snap.resultSummary = snap.result.text;
		}
	}
	details.snapshots = details.threads;
	return details;
}

/** One `threadbase serve` process and its JSON-lines connection. */
class ServeConnection {
	readonly identity: ServeIdentity;
	private readonly proc: ChildProcess;
	private readonly bin: string;
	private readonly pending = new Map<number, Pending>();
	private nextId = 1;
	private readonly lines = new LineReader((line) => this.onLine(line));
	private stderrTail = "";
	private closing = false;
	/** Set once the process is gone (or could not start); the reason pending calls got. */
	dead: Error | undefined;

	constructor(identity: ServeIdentity) {
		this.identity = identity;
		let argv: { bin: string; args: string[]; env: NodeJS.ProcessEnv };
		try {
			argv = serveArgv(identity);
		} catch (e) {
			// No binary: every call of this connection fails with the message that says what to run.
			this.bin = "threadbase";
			this.dead = e instanceof Error ? e : new Error(String(e));
			this.proc = undefined as unknown as ChildProcess;
			return;
		}
		const { bin, args, env } = argv;
		this.bin = bin;
		this.proc = spawn(bin, args, {
			cwd: identity.cwd,
			env,
			stdio: ["pipe", "pipe", "pipe"],
			windowsHide: true,
		});
		// Bytes, not strings: the reader decodes each line once, when it is complete.
		this.proc.stdout!.on("data", (chunk: Buffer) => this.lines.push(chunk));
		this.proc.stderr!.setEncoding("utf8");
		this.proc.stderr!.on("data", (chunk: string) => {
			this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_BYTES);
		});
		// EPIPE and friends surface through 'close' below; never let them crash Pi.
		this.proc.stdin!.on("error", () => {});
		this.proc.on("error", (err: NodeJS.ErrnoException) => {
			const repair =
				err.code === "ENOENT"
					? " Repair: in a threadbase checkout run `cargo install --locked --path .` and then `threadbase pi install`, or set THREADBASE_BIN to the binary's path."
					: "";
			this.fail(new Error(`Cannot run threadbase serve (${this.bin}): ${err.message}.${repair}`));
		});
		this.proc.on("close", (code, signal) => {
			const how = signal ? `signal ${signal}` : `exit code ${code}`;
			const tail = this.stderrTail.trim();
			this.fail(
				new Error(
					`threadbase serve exited (${how}) before answering.${tail ? ` Its stderr ends with:\n${tail}` : ""}`,
				),
			);
		});
		this.updateRef();
	}

	get alive(): boolean {
		return !this.dead && !this.closing;
	}

	/** Sends one request; resolves with its result, rejects with its error message. */
	request(method: string, params: unknown, onProgress?: (details: unknown) => void): Promise<ToolResult> {
		if (this.dead) return Promise.reject(this.dead);
		const id = this.nextId++;
		return new Promise<ToolResult>((resolve, reject) => {
			this.pending.set(id, { resolve, reject, onProgress });
			this.updateRef();
			this.proc.stdin!.write(`${JSON.stringify({ id, method, params })}\n`);
		});
	}

	/** Forgets a request (its response, if any, is dropped). */
	forget(id: number): void {
		if (this.pending.delete(id)) this.updateRef();
	}

	/** The id the next request gets. */
	peekId(): number {
		return this.nextId;
	}

	/** Closes stdin: the server stops its children gracefully and exits. Idempotent. */
	close(): void {
		this.showStatus(undefined);
		if (this.closing || !this.proc) return;
		this.closing = true;
		try {
			this.proc.stdin!.end();
		} catch {
			// already closed
		}
	}


	/** Called for every `notice` notification. */
	onNotice: ((params: any) => void) | undefined;

	/** Spend below this session that serve reported and no tool result has carried yet. */
	untold: PiUsage | undefined;
	/** The own usage last sent with `session_usage` (its JSON), and whether serve declined it. */
	ownSent = "";
	ownDeclined = false;
	/** How many of the session's entries `ownSum` adds up, and the last of them. */
	ownCounted = 0;
	ownLast: unknown = undefined;
	ownSum: Record<string, number> = {};

	/** The untold spend, now told (the caller puts it on the tool result it returns). */
	takeUsage(): PiUsage | undefined {
		const u = this.untold;
		this.untold = undefined;
		return u;
	}

	private onLine(line: string): void {
		if (!line.trim()) return;
		let msg: any;
		try {
			msg = JSON.parse(line);
		} catch {
			return; // not ours to interpret; stdout carries protocol records only
		}
		if (!msg || typeof msg !== "object") return;
		if (msg.id === undefined || msg.id === null) {
			if (msg.method === "progress") {
				const p = this.pending.get(Number(msg.params?.requestId));
				try {
					p?.onProgress?.(msg.params?.details);
				} catch {
					// a failing progress renderer must not break the call
				}
			}
			if (msg.method === "usage") this.untold = addUsage(this.untold, msg.params?.usage);
			if (msg.method === "supervision") {
				const p = this.pending.get(Number(msg.params?.requestId));
				if (p && typeof msg.params?.text === "string") p.supervision = msg.params.text;
			}
			if (msg.method === "status") this.showStatus(statusText(msg.params));
			if (msg.method === "notice") {
				try {
					this.onNotice?.(msg.params);
				} catch {
					// a failing notice sink must not break the connection
				}
			}
			// A server-level error without an id (a malformed line) cannot be matched to a call.
			return;
		}
		const p = this.pending.get(Number(msg.id));
		if (!p) return;
		if (Array.isArray(msg.part)) {
			// A part line: more of the list the response line that follows carries.
			const parts = (p.parts ??= []);
			for (const snapshot of msg.part) parts.push(snapshot);
			return;
		}
		this.pending.delete(Number(msg.id));
		this.updateRef();
		if (msg.error) {
			const code = msg.error.code ? ` [${msg.error.code}]` : "";
			const note = p.supervision ? `\n\n${p.supervision}` : "";
			const err = new Error(String(msg.error.message ?? `threadbase serve error${code}`) + note);
			(err as any).code = msg.error.code;
			p.reject(err);
		} else {
			const result = msg.result ?? {};
			// The `thread` tool answers {content, details}; the worker methods answer a plain JSON
			// value, which becomes both the text and the details. `agent_pause` adds
			// `terminate: true`, which ends the child's run after this tool call.
			const shaped = Array.isArray(result.content);
			const shapedResult: ToolResult = {
				content: shaped ? result.content : [{ type: "text", text: JSON.stringify(result) }],
				details: shaped ? withAliases(result.details, p.parts) : result,
			};
			if (shaped && result.terminate === true) shapedResult.terminate = true;
			// A degraded serve's note goes on the result as a text block of its own after the
			// contract's, so the model and the user see that supervision is not running.
			if (p.supervision) shapedResult.content = [...shapedResult.content, { type: "text", text: p.supervision }];
			p.resolve(shapedResult);
		}
	}

	/** Whether this connection's status entry is in the footer. */
	private statusShown = false;

	/** Puts `text` in the footer's threadbase entry (`undefined`: removes it). */
	showStatus(text: string | undefined): void {
		const ui = this.identity.statusUi;
		if (!ui || (text === undefined && !this.statusShown)) return;
		try {
			ui.setStatus(STATUS_KEY, text);
			this.statusShown = text !== undefined;
		} catch {
			// a stale or failing UI must not break the connection
		}
	}

	private fail(err: Error): void {
		if (!this.dead) this.dead = err;
		// A status no serve keeps up to date is not shown.
		this.showStatus(undefined);
		const pending = [...this.pending.values()];
		this.pending.clear();
		for (const p of pending) p.reject(err);
		this.updateRef();
	}

	/** Keep Node's event loop alive only while calls are in flight. */
	private updateRef(): void {
		if (!this.proc) return;
		const busy = this.pending.size > 0 && !this.dead;
		for (const h of [this.proc, this.proc.stdin, this.proc.stdout, this.proc.stderr] as any[]) {
			try {
				if (busy) h?.ref?.();
				else h?.unref?.();
			} catch {
				// handle already gone
			}
		}
	}
}

/**
 * The text shown for a wait progress update, as pi-threads writes it (`formatWaitProgress`):
 * `Waiting <ms>ms for "<title>".`, then `Path:`, `Status:`, `Running:` and `Next:`, from the
 * progress details' snapshot (serve's `contract::format` writes the same lines).
 */
function progressText(details: any): string {
	const snap = details?.snapshot ?? details?.thread ?? {};
	const waited = typeof details?.waitedMs === "number" ? details.waitedMs : 0;
	const actions: string[] = Array.isArray(snap.nextSuggestedActions) ? snap.nextSuggestedActions : [];
	return [
		`Waiting ${waited}ms for "${threadTitle(snap)}".`,
		`Path: ${snap.path ?? ""}`,
		`Status: ${threadStatus(snap)}`,
		`Running: ${snap.running ? "yes" : "no"}`,
		`Next: ${actionList(actions)}`,
	].join("\n");
}

/** Session name, else a display name that is neither id nor taskName, else the taskName. */
function threadTitle(snap: any): string {
	const clean = (v: unknown) => (typeof v === "string" && v.trim() !== "" ? v.trim() : null);
	const id = typeof snap.id === "string" ? snap.id : "thread";
	const session = snap.session?.kind === "known" ? clean(snap.session.name) : null;
	if (session !== null) return session;
	const name = clean(snap.name);
	if (name !== null && name !== id && name !== snap.taskName) return name;
	const task = clean(snap.taskName);
	if (task !== null && task !== id) return task.replaceAll("_", " ");
	const path = typeof snap.path === "string" ? snap.path : "";
	const base = path.slice(path.lastIndexOf("/") + 1).trim();
	if (base !== "" && base !== id) return base.replaceAll("_", " ");
	return id.startsWith("thread_") ? id.slice(0, "thread_".length + 6) : id;
}

/** `live/<phase> pid=<pid>`, `closed/stale`, `closed/failed` or `closed/<exit kind>`. */
function threadStatus(snap: any): string {
	if (snap.status === "live") {
		return typeof snap.pid === "number" ? `live/${snap.phase} pid=${snap.pid}` : `live/${snap.phase}`;
	}
	const exit = snap.exit;
	if (!exit) return `closed/${snap.phase}`;
	if (exit.kind === "stale") return "closed/stale";
	if (exit.kind === "failed" || (exit.kind === "exited" && (exit.code !== 0 || exit.signal !== null))) {
		return "closed/failed";
	}
	return `closed/${exit.kind}`;
}

function actionList(actions: string[]): string {
	if (actions.length === 0) return "none";
	if (actions.length === 1) return actions[0]!;
	return `${actions.slice(0, -1).join(", ")}, or ${actions[actions.length - 1]!}`;
}

/** pi-threads' error for a `thread` call whose abort signal fired before it ran. */
const THREAD_ACTION_ABORTED = "Thread action aborted";
/** pi-threads' error for a `wait` whose abort signal fires while it waits. */
const THREAD_WAIT_ABORTED = "Thread wait aborted";

/**
 * `call`, or a rejection with `message` as soon as `signal` aborts (then `forget` drops the
 * request's bookkeeping; the server keeps running it).
 */
function untilAborted(
	call: Promise<ToolResult>,
	signal: AbortSignal | undefined,
	message: string,
	forget: () => void,
): Promise<ToolResult> {
	if (!signal) return call;
	return new Promise<ToolResult>((resolve, reject) => {
		const onAbort = () => {
			forget();
			reject(new Error(message));
		};
		signal.addEventListener("abort", onAbort, { once: true });
		call.then(
			(r) => {
				signal.removeEventListener("abort", onAbort);
				resolve(r);
			},
			(e) => {
				signal.removeEventListener("abort", onAbort);
				reject(e);
			},
		);
	});
}

// ---- spend: the children's for Pi's totals, this session's own for the tree -----------------

/** A usage object as Pi 1.6 writes one (pi-ai's `Usage`). */
export interface PiUsage {
	input: number;
	output: number;
	cacheRead: number;
	cacheWrite: number;
	totalTokens: number;
	cost: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number };
}

/** Issue 30: the tool that answers a child's question (registered with THREADBASE_UI=parent). */
export const ANSWER_TOOL = "thread_answer";
const ANSWER_DESCRIPTION =
	"Answer a question a child thread asked (THREADBASE_UI=parent): its poll or wait shows the question (confirm, select, input or editor) and the child waits until it is answered. id: the thread's id or path. answer: true or false for a confirm, one of the options (exactly) for a select, a string for input or editor.";
const AnswerParams = Type.Object(
	{
		id: Type.String({ description: "The thread whose question this answers: its id or path." }),
		answer: Type.Union([Type.Boolean(), Type.String()], {
			description: "true/false for a confirm; one of the options for a select; the text for input or editor.",
		}),
	},
	{ additionalProperties: false },
);

/** THREADBASE_UI=parent: a child's dialogs wait for this session's answer. */
export function askParent(): boolean {
	return process.env.THREADBASE_UI?.trim().toLowerCase() === "parent";
}

/** The tools this extension forwards to serve: their results' usage is the children's spend. */
export const THREADBASE_TOOLS = new Set([
	"thread",
	"agent_spawn",
	"agent_wait",
	"agent_steer",
	"agent_status",
	"agent_update",
	"agent_pause",
	"agent_stop",
	"agent_output",
	"threads_spawn",
	"threads_list",
	"threads_send",
	"threads_interrupt",
	"threads_hide",
	"threads_report",
	"thread_answer",
]);

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0);

/**
 * `a` plus the usage `b` (missing or malformed fields count as 0). Pi 1.6 adds a tool result's
 * `usage` to the session's totals (`getSessionStats`: `get_session_stats` in RPC mode, the
 * interactive footer) and keeps it in the session file with the result; serve's `usage`
 * notifications carry the spend of the threads below this session that no earlier one
 * reported, so each child's spend reaches this session's totals once.
 */
export function addUsage(a: PiUsage | undefined, b: any): PiUsage | undefined {
	if (!b || typeof b !== "object") return a;
	const base: PiUsage = a ?? {
		input: 0,
		output: 0,
		cacheRead: 0,
		cacheWrite: 0,
		totalTokens: 0,
		cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
	};
	const c = b.cost ?? {};
	return {
		input: base.input + num(b.input),
		output: base.output + num(b.output),
		cacheRead: base.cacheRead + num(b.cacheRead),
		cacheWrite: base.cacheWrite + num(b.cacheWrite),
		totalTokens: base.totalTokens + num(b.totalTokens),
		cost: {
			input: base.cost.input + num(c.input),
			output: base.cost.output + num(c.output),
			cacheRead: base.cost.cacheRead + num(c.cacheRead),
			cacheWrite: base.cost.cacheWrite + num(c.cacheWrite),
			total: base.cost.total + num(c.total),
		},
	};
}

/** `result` with the connection's untold spend as its `usage` (none: returned as it is). */
function withSpend(c: ServeConnection, result: ToolResult): ToolResult {
	const usage = c.takeUsage();
	if (usage) result.usage = usage;
	return result;
}

/**
 * This session's own spend, as Pi's session stats add it up (assistant messages, `usage`
 * entries, compactions and branch summaries, tool results' own usage) but without the results
 * of this extension's tools (the children's spend, which their own rows count); `turns` are
 * assistant messages and `toolCalls` their tool calls. Undefined when the session manager
 * cannot list entries.
 */
export function ownUsage(entries: unknown): Record<string, number> | undefined {
	if (!Array.isArray(entries)) return undefined;
	return addOwnUsage(entries, 0, { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0, turns: 0, toolCalls: 0 });
}

/** Adds the own spend of `entries` from index `from` on to `u` (see [`ownUsage`]); returns `u`. */
function addOwnUsage(entries: any[], from: number, u: Record<string, number>): Record<string, number> {
	const add = (x: any) => {
		if (!x || typeof x !== "object") return;
		u.input += num(x.input);
		u.output += num(x.output);
		u.cacheRead += num(x.cacheRead);
		u.cacheWrite += num(x.cacheWrite);
		u.cost += num(x.cost?.total);
	};
	for (let i = from; i < entries.length; i++) {
		const e = entries[i];
		if (e?.type === "usage") add(e.usage);
		else if ((e?.type === "compaction" || e?.type === "branch_summary") && e.usage) add(e.usage);
		if (e?.type !== "message") continue;
		const m = e.message;
		if (m?.role === "assistant") {
			u.turns += 1;
			if (Array.isArray(m.content)) u.toolCalls += m.content.filter((b: any) => b?.type === "toolCall").length;
			add(m.usage);
		} else if (m?.role === "toolResult" && m.usage && !THREADBASE_TOOLS.has(m.toolName)) {
			add(m.usage);
		}
	}
	return u;
}

/**
 * Tells serve this (root) session's own spend (`session_usage`), so `threadbase usage` and the
 * budgets count it with the tree's threads; only when it changed since the last report, and
 * never again once serve declined it (a managed child's serve: its thread's row counts it).
 * Never throws: the spend is reported again on the next call.
 */
async function reportOwnUsage(c: ServeConnection, ctx: any): Promise<void> {
	if (!c.alive || c.ownDeclined) return;
	let own: Record<string, number> | undefined;
	try {
		const entries = ctx?.sessionManager?.getEntries?.();
		if (!Array.isArray(entries)) return;
		// Entries are only appended: go on from the last one counted while it is still in place
		// (a long session is not summed again at every tool call), else count them all again.
		const n = c.ownCounted;
		const from = n > 0 && entries.length >= n && entries[n - 1] === c.ownLast ? n : 0;
		const base = from > 0 ? { ...c.ownSum } : { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0, turns: 0, toolCalls: 0 };
		own = addOwnUsage(entries, from, base);
		c.ownCounted = entries.length;
		c.ownLast = entries[entries.length - 1];
		c.ownSum = { ...own };
	} catch {
		return;
	}
	const key = JSON.stringify(own);
	if (key === c.ownSent) return;
	c.ownSent = key;
	try {
		const r = await c.request("session_usage", own);
		if ((r.details as any)?.recorded === false) c.ownDeclined = true;
	} catch {
		c.ownSent = "";
	}
}

/**
 * Reports the session's own spend before a call: awaited when the call may be refused by a
 * budget (its check must count the session's turns), else sent on the same pipe ahead of the
 * call without waiting for its answer, so a `poll`, `list` or `wait` pays no extra round trip.
 */
async function ownUsageFirst(c: ServeConnection, ctx: any, budgeted: boolean): Promise<void> {
	if (budgeted) await reportOwnUsage(c, ctx);
	else void reportOwnUsage(c, ctx);
}

/** The contracts whose tools this extension registers (THREADBASE_TOOLS). */
function enabledTools(): Set<string> {
	const raw = process.env.THREADBASE_TOOLS?.trim();
	const names = (raw ? raw.split(",") : ["thread"]).map((s) => s.trim().toLowerCase()).filter(Boolean);
	return new Set(names);
}

const Str = (description: string) => Type.String({ description });

/** The worker tools (contract C): name, parameters, description. */
const WORKER_TOOLS = [
	{
		name: "threads_spawn",
		description: "Start (or idempotently re-attach to) a managed worker session for a keyed task.",
		parameters: Type.Object(
			{
				key: Str("Stable task name: the same coordinator and key always name the same worker."),
				title: Str("Conversation title."),
				directory: Str("Existing absolute folder where the worker runs."),
				task: Str("The brief; worker instructions are appended to it."),
				agent: Type.Optional(Str("Configured agent profile to use for the worker.")),
				paths: Type.Optional(Type.Array(Type.String(), { description: "Existing absolute folders outside directory the worker may use." })),
			},
			{ additionalProperties: false },
		),
	},
	{ name: "threads_list", description: "List this coordinator's workers.", parameters: Type.Object({}, { additionalProperties: false }) },
	{
		name: "threads_send",
		description: "Send keyed text to a worker; the same key with the same text is a safe retry.",
		parameters: Type.Object({ workerID: Str("The worker's session id."), key: Str("Message key."), text: Str("The message.") }, { additionalProperties: false }),
	},
	{
		name: "threads_interrupt",
		description: "Interrupt a worker's current run.",
		parameters: Type.Object({ workerID: Str("The worker's session id.") }, { additionalProperties: false }),
	},
	{
		name: "threads_hide",
		description: "Hide a worker from the list (it keeps running).",
		parameters: Type.Object({ workerID: Str("The worker's session id.") }, { additionalProperties: false }),
	},
	{
		name: "threads_report",
		description: "Report this worker's result to its coordinator, once.",
		parameters: Type.Object(
			{
				verdict: stringEnum(["PASS", "PASS WITH NOTES", "FAIL", "INCONCLUSIVE"] as const, "The verdict."),
				summary: Str("Non-empty summary."),
				evidence: Type.Array(Type.String(), { description: "Commands run and their results, etc." }),
			},
			{ additionalProperties: false },
		),
	},
] as const;

/** The subagent lifecycle tools (contract B): name, parameters, description. */
const AGENT_TOOLS = [
	{
		name: "agent_spawn",
		description:
			"Start a subagent at a path named after its task (e.g. fix-auth, or /k for an independent root without this conversation's history). By default waits until it settles and returns its final answer.",
		parameters: Type.Object(
			{
				path: Str("Child path: a name under you (fix-auth) or an absolute path (/root/fix-auth, /k)."),
				type: Type.String({ minLength: 1, description: "The agent type (e.g. worker); it names the child's session (worker /root/fix-auth)." }),
				task: Str("What the child should do."),
				wait: Type.Optional(Type.Boolean({ description: "Wait until the child settles (default true)." })),
				timeoutMs: Type.Optional(Type.Number({ description: "Report-only timeout, 30000–300000 ms: if the child is still working then, you get one timeout notice with its recent output; it is never stopped." })),
			},
			{ additionalProperties: false },
		),
	},
	{
		name: "agent_wait",
		description: "Wait until a subagent settles; a timeout returns its current view and never stops it.",
		parameters: Type.Object(
			{ path: Str("The subagent's path."), timeoutMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600000 })) },
			{ additionalProperties: false },
		),
	},
	{
		name: "agent_steer",
		description: "Send a subagent a message: steers a running one, resumes a completed, paused, stopped or failed one in its same session. timeoutMs (alone or with a message) re-arms its report-only timeout.",
		parameters: Type.Object(
			{
				path: Str("The subagent's path."),
				message: Type.Optional(Str("The message.")),
				timeoutMs: Type.Optional(Type.Number({ description: "Report-only timeout from now, 30000–300000 ms (replaces a pending one)." })),
			},
			{ additionalProperties: false },
		),
	},
	{
		name: "agent_status",
		description: "One subagent's view, or (without path) every subagent you can address.",
		parameters: Type.Object({ path: Type.Optional(Str("The subagent's path.")) }, { additionalProperties: false }),
	},
	{
		name: "agent_update",
		description: "Report progress to your parent without ending your task (only as a subagent).",
		parameters: Type.Object({ message: Type.String({ minLength: 1, maxLength: 8000 }) }, { additionalProperties: false }),
	},
	{
		name: "agent_pause",
		description: "Pause yourself for input from your parent (only as a subagent). Call it alone; your run ends after it.",
		parameters: Type.Object({ reason: Str("What you need before you can continue.") }, { additionalProperties: false }),
	},
	{
		name: "agent_stop",
		description: "Stop a subagent (in any state) and its working descendants (completed descendants stay completed); the session is kept, resume it with agent_steer.",
		parameters: Type.Object({ path: Str("The subagent's path.") }, { additionalProperties: false }),
	},
	{
		name: "agent_output",
		description: "Read a completed subagent's final answer in pages.",
		parameters: Type.Object(
			{
				path: Str("The subagent's path."),
				offset: Type.Optional(Type.Integer({ minimum: 0 })),
				limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 16000, description: "Characters per page (default 8000)." })),
			},
			{ additionalProperties: false },
		),
	},
] as const;

// ---- /threads: an observability browser over Pi's dialog UI ----------------------------------

/** Fixed entries of the `/threads` dialogs (thread entries start with their `/root/...` path). */
const THREADS_UI = {
	refresh: "⟳ Refresh",
	up: "↑ Up",
	close: "✕ Close",
	actionRefresh: "Refresh",
	actionChildren: "Children",
	actionStop: "Stop",
	actionAnswer: "Answer its question",
	actionBack: "Back",
} as const;

/** Longest summary shown in a dialog title or a notification. */
const SUMMARY_CHARS = 1500;

type ThreadCall = (params: Record<string, unknown>) => Promise<ToolResult>;

function resultText(r: ToolResult): string {
	return r.content
		.filter((c) => c && c.type === "text")
		.map((c) => c.text)
		.join("\n")
		.trim();
}

function clip(text: string, max = SUMMARY_CHARS): string {
	return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function errorText(e: unknown): string {
	return e instanceof Error ? e.message : String(e);
}

/**
 * A thread's state in words, spelled as `tree`, `usage` and `top` spell it (threadbase's
 * `domain::state_words`): `live/<phase>` while live; once closed `closed/failed` for an exit
 * with a non-zero code or a signal, else `closed/<exit kind>`.
 */
/**
 * A snapshot's state in words, as every surface spells them (`domain::state_words`): a live
 * thread that needs the user reads its attention word from serve (`snap.attention`, the view
 * `thread_attention`: issue 45), else its phase.
 */
export function stateWords(snap: any): string {
	const words: Record<string, string> = { owner_gone: "owner gone", unreachable: "host unreachable" };
	const need = snap?.attention?.attention;
	if (snap?.status === "live" && typeof need === "string") return `live/${words[need] ?? need}`;
	if (snap?.status === "live") return `live/${snap?.phase ?? "?"}`;
	const exit = snap?.exit;
	if (exit?.kind === "exited" && ((exit.code ?? 0) !== 0 || exit.signal)) return "closed/failed";
	return `closed/${exit?.kind ?? snap?.phase ?? "?"}`;
}

/** One `/threads` option per thread: `path  state  name`. */
function threadOption(snap: any): string {
	const name = typeof snap?.name === "string" && snap.name && snap.name !== snap.taskName ? `  ${snap.name}` : "";
	// Issue 30: a thread waiting in the queue, or waiting for an answer, says so.
	const queued = typeof snap?.queuePosition === "number" ? `  queued #${snap.queuePosition}` : "";
	const asks = snap?.question ? `  ? ${snap.question.kind}` : "";
	return `${snap?.path ?? snap?.id ?? "?"}  ${stateWords(snap)}${queued}${asks}${name}`;
}

/**
 * Asks the user a child's question (THREADBASE_UI=parent) with the dialog of its kind; the
 * answer goes to `thread_answer`. `undefined`: the user dismissed the dialog (nothing is sent).
 */
export async function askUser(ui: any, q: any): Promise<string | boolean | undefined> {
	const title = [q?.title, q?.message].filter((t) => typeof t === "string" && t).join(" — ") || "The thread asks";
	switch (q?.kind) {
		case "confirm":
			return await ui.confirm(title, q?.message ?? "");
		case "select":
			return await ui.select(title, Array.isArray(q?.options) ? q.options : []);
		case "input":
			return await ui.input(title);
		case "editor":
			return await ui.editor(title, "");
		default:
			return undefined;
	}
}

/**
 * `/threads`: lists the current level's threads (`list` with `parent`: `.` at the top, else the
 * thread whose children are shown), and for a picked thread shows its `poll` summary with the
 * actions Refresh, Children, Stop (live threads only, after a confirmation) and Back. There is
 * deliberately no way to start threads or send to them from here (contract: `/threads` command
 * boundary); those stay tool-level primitives.
 */
async function browseThreads(ctx: any, call: ThreadCall, answer?: ThreadCall): Promise<void> {
	const ui = ctx.ui;
	if (!ctx.hasUI) return;
	/** Paths whose children are shown; empty: this session's own children. */
	const levels: string[] = [];
	for (;;) {
		const parent = levels.length ? levels[levels.length - 1] : ".";
		let listed: ToolResult;
		try {
			listed = await call({ action: "list", parent });
		} catch (e) {
			ui.notify(`threads: list failed: ${errorText(e)}`, "error");
			if (!levels.length) return;
			levels.pop();
			continue;
		}
		const d: any = listed.details ?? {};
		const threads: any[] = Array.isArray(d.threads) ? d.threads : [];
		const byOption = new Map<string, any>();
		for (const t of threads) byOption.set(threadOption(t), t);
		const options = [...byOption.keys(), THREADS_UI.refresh];
		if (levels.length) options.push(THREADS_UI.up);
		options.push(THREADS_UI.close);
		const where = levels.length ? `Threads under ${parent}` : "Threads of this session";
		const counts = `${threads.length} (${d.liveCount ?? 0} live, ${d.closedCount ?? 0} closed)`;
		const choice: string | undefined = await ui.select(`${where}: ${counts}`, options);
		if (choice === undefined || choice === THREADS_UI.close) return;
		if (choice === THREADS_UI.refresh) continue;
		if (choice === THREADS_UI.up) {
			levels.pop();
			continue;
		}
		const picked = byOption.get(choice);
		if (!picked) continue;
		const next = await showThread(ui, call, String(picked.path ?? picked.id), answer);
		if (next === "children") levels.push(String(picked.path ?? picked.id));
	}
}

/** The summary of one thread and its actions; tells the browser where to go next. */
async function showThread(ui: any, call: ThreadCall, path: string, answer?: ThreadCall): Promise<"back" | "children"> {
	for (;;) {
		let polled: ToolResult;
		try {
			polled = await call({ action: "poll", id: path, detail: "summary" });
		} catch (e) {
			ui.notify(`threads: poll ${path} failed: ${errorText(e)}`, "error");
			return "back";
		}
		const snap: any = (polled.details as any)?.snapshot ?? {};
		const state = `${path} is ${snap.status ?? "?"}/${snap.phase ?? "?"}`;
		// The poll summary is shown once, as a notification; the dialog's title only names the
		// thread and its state.
		ui.notify(clip(resultText(polled) || state), "info");
		const actions: string[] = [THREADS_UI.actionRefresh, THREADS_UI.actionChildren];
		if (snap.question && answer) actions.unshift(THREADS_UI.actionAnswer);
		if (snap.status === "live") actions.push(THREADS_UI.actionStop);
		actions.push(THREADS_UI.actionBack);
		const choice: string | undefined = await ui.select(`${state}: choose an action`, actions);
		if (choice === undefined || choice === THREADS_UI.actionBack) return "back";
		if (choice === THREADS_UI.actionChildren) return "children";
		if (choice === THREADS_UI.actionRefresh) continue;
		if (choice === THREADS_UI.actionAnswer && answer) {
			const value = await askUser(ui, snap.question);
			if (value === undefined) continue;
			try {
				const answered = await answer({ id: snap.id ?? path, answer: value });
				ui.notify(clip(resultText(answered) || `Answered ${path}.`), "info");
			} catch (e) {
				ui.notify(`threads: answer ${path} failed: ${errorText(e)}`, "error");
			}
			continue;
		}
		if (choice === THREADS_UI.actionStop) {
			const yes: boolean = await ui.confirm(
				`Stop ${path}?`,
				"It is stopped gracefully (abort, then SIGTERM, then SIGKILL); the thread tool's resume can restart it later.",
			);
			if (!yes) continue;
			try {
				const stopped = await call({ action: "stop", id: path });
				ui.notify(clip(resultText(stopped) || `Stopped ${path}.`), "info");
			} catch (e) {
				ui.notify(`threads: stop ${path} failed: ${errorText(e)}`, "error");
			}
		}
	}
}

/** Whether a session's entries hold a result of the `thread` tool (or a notice about one). */
export function usedThreadTool(entries: any[]): boolean {
	return entries.some(
		(e) =>
			e?.type === "message" &&
			((e.message?.role === "toolResult" && e.message?.toolName === TOOL_NAME) ||
				(e.message?.role === "custom" && e.message?.customType === "threadbase-notice")),
	) || entries.some((e) => e?.type === "custom_message" && e.customType === "threadbase-notice");
}

export default function threadbaseExtension(pi: ExtensionAPI) {
	const tools = enabledTools();
	// One server per session runtime: this factory runs again after a session switch/fork/new.
	let conn: ServeConnection | undefined;

	function connection(identity: ServeIdentity): ServeConnection {
		if (
			conn &&
			conn.alive &&
			conn.identity.sessionFile === identity.sessionFile &&
			conn.identity.sessionId === identity.sessionId
		) {
			return conn;
		}
		// Gone, closing, or another session: (re)start lazily.
		conn?.close();
		conn = new ServeConnection(identity);
		conn.onNotice = (params: any) => {
			const text = typeof params?.text === "string" ? params.text : JSON.stringify(params);
			// Notices never start a turn, except contract B's final recap (`finalRecap`), which
			// asks for one summary turn.
			pi.sendMessage(
				{ customType: "threadbase-notice", content: text, display: true, details: params },
				{ triggerTurn: params?.kind === "recap" },
			);
		};
		return conn;
	}

	function identityOf(ctx: any): ServeIdentity {
		return {
			sessionFile: ctx.sessionManager.getSessionFile(),
			sessionId: ctx.sessionManager.getSessionId(),
			cwd: ctx.cwd,
			statusUi: statusUiOf(ctx),
		};
	}

	if (tools.has("worker")) {
		for (const tool of WORKER_TOOLS) {
			pi.registerTool({
				name: tool.name,
				label: tool.name,
				description: tool.description,
				parameters: tool.parameters as any,
				async execute(_toolCallId, params, signal, _onUpdate, ctx) {
					if (signal?.aborted) throw new Error(`${tool.name} aborted`);
					const c = connection(identityOf(ctx));
					await ownUsageFirst(c, ctx, tool.name === "threads_spawn" || tool.name === "threads_send");
					return withSpend(c, await c.request(tool.name, params));
				},
			});
		}
	}

	if (tools.has("agent")) {
		for (const tool of AGENT_TOOLS) {
			pi.registerTool({
				name: tool.name,
				label: tool.name,
				description: tool.description,
				parameters: tool.parameters as any,
				async execute(_toolCallId, params, signal, _onUpdate, ctx) {
					const cancelled = tool.name === "agent_wait" || tool.name === "agent_spawn"
						? "Waiting cancelled; thread remains running"
						: `${tool.name} aborted`;
					if (signal?.aborted) throw new Error(cancelled);
					const c = connection(identityOf(ctx));
					await ownUsageFirst(c, ctx, tool.name === "agent_spawn" || tool.name === "agent_steer");
					const requestId = c.peekId();
					const result = await untilAborted(c.request(tool.name, params), signal, cancelled, () => c.forget(requestId));
					return withSpend(c, result);
				},
			});
		}
		// `/agents reap`: count the completed subagents that can be forgotten, ask, forget them.
		pi.registerCommand("agents", {
			description: "Subagents: /agents reap forgets completed subagents with nothing working beneath them (asks first).",
			handler: async (args, ctx) => {
				const ui = (ctx as any).ui;
				const words = String(args ?? "").trim().split(/\s+/).filter(Boolean);
				if (words[0] !== "reap" || words.length > 1) {
					ui.notify("Usage: /agents reap", "info");
					return;
				}
				try {
					const c = connection(identityOf(ctx));
					const probe: any = await c.request("agents.reap", { dryRun: true });
					const count: number = probe?.details?.count ?? 0;
					if (count === 0) {
						ui.notify("No completed subagents to reap.", "info");
						return;
					}
					const noun = count === 1 ? "subagent" : "subagents";
					const choice: string | undefined = await ui.select(
						`Reap ${count} completed ${noun}? They are forgotten and cannot be resumed; their session files stay.`,
						["Confirm", "Cancel"],
					);
					if (choice !== "Confirm") {
						ui.notify("Reap cancelled.", "info");
						return;
					}
					const done: any = await c.request("agents.reap", {});
					const n: number = done?.details?.count ?? 0;
					ui.notify(`Reaped ${n} ${n === 1 ? "subagent" : "subagents"}.`, "info");
				} catch (e) {
					ui.notify(`agents reap failed: ${errorText(e)}`, "error");
				}
			},
		});
		// Saved notices for this agent are delivered as soon as its session starts.
		pi.on("session_start", async (_event, ctx) => {
			try {
				connection(identityOf(ctx));
			} catch {
				// the first tool call reports a server that cannot start
			}
		});
	}

	if (tools.has("thread")) pi.registerTool({
		name: TOOL_NAME,
		label: "Thread",
		description: TOOL_DESCRIPTION,
		promptSnippet: PROMPT_SNIPPET,
		promptGuidelines: PROMPT_GUIDELINES,
		parameters: ThreadParams,
		async execute(_toolCallId, params, signal, onUpdate, ctx) {
			// pi-threads' texts: a call whose signal fired before it ran fails with
			// `Thread action aborted`, whatever the action (checked before the parameters);
			// once running, only a `wait` heeds the signal (`Thread wait aborted`), and every
			// other action runs to its result, as the original's do.
			if (signal?.aborted) throw new Error(THREAD_ACTION_ABORTED);
			const action = (params as { action?: Action }).action;
			const c = connection(identityOf(ctx));
			const progress: Progress | undefined = onUpdate as Progress | undefined;
			// The session's own spend first, so a start's budget check counts its turns.
			await ownUsageFirst(c, ctx, action === "start" || action === "fork" || action === "resume" || action === "send");
			const requestId = c.peekId();
			const call = c.request("thread", params, (details) => {
				progress?.({ content: [{ type: "text", text: progressText(details) }], details });
			});
			if (action !== "wait") return withSpend(c, await call);
			// An abort ends the wait only; the server keeps running and the child is never
			// stopped by it.
			return withSpend(c, await untilAborted(call, signal, THREAD_WAIT_ABORTED, () => c.forget(requestId)));
		},
	});

	// Issue 30: with THREADBASE_UI=parent, a child's question waits for this session's answer,
	// given with a second tool (the `thread` tool's actions are the contract's).
	if ((tools.has("thread") || tools.has("agent")) && askParent()) pi.registerTool({
		name: ANSWER_TOOL,
		label: "Thread answer",
		description: ANSWER_DESCRIPTION,
		parameters: AnswerParams,
		async execute(_toolCallId, params, signal, _onUpdate, ctx) {
			if (signal?.aborted) throw new Error(`${ANSWER_TOOL} aborted`);
			const c = connection(identityOf(ctx));
			return withSpend(c, await c.request(ANSWER_TOOL, params));
		},
	});

	// A session that has used the `thread` tool gets its serve back as soon as it starts again
	// (`pi --session FILE`, `pi -c`): the notices saved while it was away (a thread closed as
	// stale by a restore, one that settled as the last serve ended) arrive at once, and the
	// restore pass runs without waiting for a tool call. A session that never used it starts
	// no serve.
	if (tools.has("thread")) pi.on("session_start", async (_event, ctx) => {
		try {
			if (!usedThreadTool(ctx.sessionManager.getEntries())) return;
			connection(identityOf(ctx));
		} catch {
			// the first tool call reports a server that cannot start
		}
	});

	pi.registerCommand("threads", {
		description: "Browse this session's threads: status, summary, children, stop.",
		handler: async (_args, ctx) => {
			await browseThreads(
				ctx,
				(params) => connection(identityOf(ctx)).request("thread", params),
				askParent() ? (params) => connection(identityOf(ctx)).request(ANSWER_TOOL, params) : undefined,
			);
		},
	});

	// The session's own spend after each of its turns, once a serve runs for it (one is never
	// started just for this).
	pi.on("turn_end", async (_event, ctx) => {
		if (conn?.alive) await reportOwnUsage(conn, ctx);
	});

	pi.on("session_shutdown", async () => {
		conn?.close();
		conn = undefined;
	});
}
