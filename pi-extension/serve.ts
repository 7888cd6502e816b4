/**
 * The connection to `threadbase serve`: finding the binary, its argv and environment, the
 * process, and the JSON-lines pipe (`LineReader` splits it; `ServeConnection` matches answers
 * to requests and hands notifications on). What crosses the pipe is typed in protocol.ts.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants as fsConstants, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type {
	ErrorLine,
	ListedDetails,
	Method,
	NoticeParams,
	PartLine,
	ResultLine,
	ServeLine,
	ShapedResult,
	SingleDetails,
	Snapshot,
	ToolResult,
} from "./protocol.ts";
import { SessionSpend } from "./spend.ts";
import { STATUS_KEY, statusText, type StatusUi } from "./status.ts";

/** Bytes of the server's stderr kept for error messages. */
const STDERR_TAIL_BYTES = 4000;

/** Which Pi session a serve speaks for. */
export interface ServeIdentity {
	sessionFile: string | undefined;
	sessionId: string;
	cwd: string;
	/** Where the tree's status line goes (see status.ts `statusUiOf`); none: serve sends no status. */
	statusUi?: StatusUi;
}

interface Pending {
	resolve: (result: ToolResult) => void;
	reject: (error: Error) => void;
	onProgress?: (details: SingleDetails) => void;
	/** A list's snapshots so far, from its part lines (see withAliases). */
	parts?: Snapshot[];
	/** The `supervision` note serve sent before this answer (it is degraded: issue 46). */
	supervision?: string;
}

/** An error serve answered, with its code (`invalid_params`, `unknown_reference`, …). */
export interface ServeError extends Error {
	code?: string;
}

export function envFlag(name: string): boolean {
	const v = (process.env[name] ?? "").trim().toLowerCase();
	return v === "1" || v === "true" || v === "yes";
}

export function errorText(e: unknown): string {
	return e instanceof Error ? e.message : String(e);
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
			const recorded: unknown = JSON.parse(readFileSync(record, "utf8"));
			const bin = recorded && typeof recorded === "object" ? (recorded as { bin?: unknown }).bin : undefined;
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
	// `usage` notifications: the children's spend, for the tool results (see spend.ts addUsage).
	args.push("--report-usage");
	// `status` notifications: the tree's status line, for Pi's footer (see status.ts).
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
export function withAliases(details: unknown, parts: Snapshot[] = []): unknown {
	if (!isCompactList(details)) return details;
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

function isCompactList(details: unknown): details is ListedDetails {
	if (!details || typeof details !== "object") return false;
	const d = details as Partial<ListedDetails>;
	return d.kind === "listed" && d.snapshots === 0;
}

function isShaped(result: ResultLine["result"]): result is ShapedResult {
	return !!result && Array.isArray((result as Partial<ShapedResult>).content);
}

/** One `threadbase serve` process and its JSON-lines connection. */
export class ServeConnection {
	readonly identity: ServeIdentity;
	private readonly proc: ChildProcess | undefined;
	private readonly bin: string;
	private readonly pending = new Map<number, Pending>();
	private nextId = 1;
	private readonly lines = new LineReader((line) => this.onLine(line));
	private stderrTail = "";
	private closing = false;
	/** Whether this connection's status entry is in the footer. */
	private statusShown = false;
	/** Set once the process is gone (or could not start); the reason pending calls got. */
	dead: Error | undefined;
	/** Called for every `notice` notification. */
	onNotice: ((params: NoticeParams) => void) | undefined;
	/** The children's spend not told yet, and this session's own as last reported (spend.ts). */
	readonly spend = new SessionSpend();

	constructor(identity: ServeIdentity) {
		this.identity = identity;
		let argv: { bin: string; args: string[]; env: NodeJS.ProcessEnv };
		try {
			argv = serveArgv(identity);
		} catch (e) {
			// No binary: every call of this connection fails with the message that says what to run.
			this.bin = "threadbase";
			this.dead = e instanceof Error ? e : new Error(String(e));
			this.proc = undefined;
			return;
		}
		const { bin, args, env } = argv;
		this.bin = bin;
		const proc = spawn(bin, args, {
			cwd: identity.cwd,
			env,
			stdio: ["pipe", "pipe", "pipe"],
			windowsHide: true,
		});
		this.proc = proc;
		// Bytes, not strings: the reader decodes each line once, when it is complete.
		proc.stdout.on("data", (chunk: Buffer) => this.lines.push(chunk));
		proc.stderr.setEncoding("utf8");
		proc.stderr.on("data", (chunk: string) => {
			this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_BYTES);
		});
		// EPIPE and friends surface through 'close' below; never let them crash Pi.
		proc.stdin.on("error", () => {});
		proc.on("error", (err: NodeJS.ErrnoException) => {
			const repair =
				err.code === "ENOENT"
					? " Repair: in a threadbase checkout run `cargo install --locked --path .` and then `threadbase pi install`, or set THREADBASE_BIN to the binary's path."
					: "";
			this.fail(new Error(`Cannot run threadbase serve (${this.bin}): ${err.message}.${repair}`));
		});
		proc.on("close", (code, signal) => {
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
	request(method: Method, params: unknown, onProgress?: (details: SingleDetails) => void): Promise<ToolResult> {
		if (this.dead) return Promise.reject(this.dead);
		const id = this.nextId++;
		return new Promise<ToolResult>((resolve, reject) => {
			this.pending.set(id, { resolve, reject, onProgress });
			this.updateRef();
			this.proc?.stdin?.write(`${JSON.stringify({ id, method, params })}\n`);
		});
	}

	/**
	 * Sends a request of a method that answers a plain JSON value (contract C's, the internal
	 * ones) and resolves with that value, typed as the protocol says it is.
	 */
	async ask<T>(method: Method, params: unknown): Promise<Partial<T>> {
		const r = await this.request(method, params);
		const value = r.details;
		return value && typeof value === "object" ? (value as Partial<T>) : {};
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
			this.proc.stdin?.end();
		} catch {
			// already closed
		}
	}

	private onLine(line: string): void {
		if (!line.trim()) return;
		let parsed: unknown;
		try {
			parsed = JSON.parse(line);
		} catch {
			return; // not ours to interpret; stdout carries protocol records only
		}
		if (!parsed || typeof parsed !== "object") return;
		const msg = parsed as ServeLine;
		if (!("id" in msg) || msg.id === undefined || msg.id === null) {
			if (!("method" in msg)) return; // a server-level error without an id cannot be matched to a call
			switch (msg.method) {
				case "progress": {
					const p = this.pending.get(Number(msg.params?.requestId));
					try {
						p?.onProgress?.(msg.params?.details);
					} catch {
						// a failing progress renderer must not break the call
					}
					break;
				}
				case "usage":
					this.spend.heard(msg.params?.usage);
					break;
				case "status":
					this.showStatus(statusText(msg.params));
					break;
				case "supervision": {
					const p = this.pending.get(Number(msg.params?.requestId));
					if (p && typeof msg.params?.text === "string") p.supervision = msg.params.text;
					break;
				}
				case "notice":
					try {
						this.onNotice?.(msg.params);
					} catch {
						// a failing notice sink must not break the connection
					}
					break;
			}
			return;
		}
		const p = this.pending.get(Number(msg.id));
		if (!p) return;
		if ("part" in msg && Array.isArray(msg.part)) {
			// A part line: more of the list the response line that follows carries.
			const parts = (p.parts ??= []);
			for (const snapshot of (msg as PartLine).part) parts.push(snapshot);
			return;
		}
		this.pending.delete(Number(msg.id));
		this.updateRef();
		if ("error" in msg && msg.error) {
			const e = (msg as ErrorLine).error;
			const code = e.code ? ` [${e.code}]` : "";
			const note = p.supervision ? `\n\n${p.supervision}` : "";
			const err: ServeError = new Error(String(e.message ?? `threadbase serve error${code}`) + note);
			err.code = e.code;
			p.reject(err);
			return;
		}
		const result = (msg as ResultLine).result ?? {};
		// The `thread` tool answers {content, details}; the worker methods answer a plain JSON
		// value, which becomes both the text and the details. `agent_pause` adds
		// `terminate: true`, which ends the child's run after this tool call.
		if (isShaped(result)) {
			const shaped: ToolResult = { content: result.content, details: withAliases(result.details, p.parts) };
			if (result.terminate === true) shaped.terminate = true;
			p.resolve(withSupervision(shaped, p.supervision));
		} else {
			const plain: ToolResult = { content: [{ type: "text", text: JSON.stringify(result) }], details: result };
			p.resolve(withSupervision(plain, p.supervision));
		}
	}

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
		const proc = this.proc;
		if (!proc) return;
		const busy = this.pending.size > 0 && !this.dead;
		// The pipes are sockets at run time (`ref`/`unref`), typed as plain streams.
		type Handle = { ref?: () => unknown; unref?: () => unknown } | null | undefined;
		for (const h of [proc, proc.stdin, proc.stdout, proc.stderr] as unknown[] as Handle[]) {
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
 * `call`, or a rejection with `message` as soon as `signal` aborts (then `forget` drops the
 * request's bookkeeping; the server keeps running it).
 */
export function untilAborted(
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

/**
 * A degraded serve's note goes on the result as a text block of its own after the contract's,
 * so the model and the user see that supervision is not running (issue 46).
 */
function withSupervision(result: ToolResult, note: string | undefined): ToolResult {
	return note ? { ...result, content: [...result.content, { type: "text", text: note }] } : result;
}
