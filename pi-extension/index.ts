/**
 * threadbase Pi extension: registers the pi-threads `thread` tool (and, with THREADBASE_TOOLS,
 * the `agent_*` and `threads_*` tools) and forwards every call to a `threadbase serve` process
 * that owns this session's background Pi children. This file wires the parts together:
 *
 * - serve.ts: the serve process and its JSON-lines connection (`ServeConnection`,
 *   `LineReader`, `withAliases`). The server is started lazily, on the first call of a session
 *   runtime, with `--session-file`, `--session-id`, `--cwd` and `--parent-args` describing this
 *   Pi session, and it inherits this process's environment (THREADBASE_DB, THREADBASE_PI_COMMAND,
 *   PI_THREADS_*, PI_CODING_AGENT_DIR, ...). It runs with `--wire compact`: a list's threads
 *   cross the pipe once, in part lines before the response line, and `withAliases` puts them in
 *   `details.threads` and `details.snapshots` (the same array).
 * - protocol.ts: the types of every request, answer and notification on that pipe.
 * - tools.ts: the tools, one table (`TOOLS`): name, description, schema, how a call goes.
 * - commands.ts: `/threads` and `/agents reap`.
 * - spend.ts (issue 28): serve runs with `--report-usage`; its `usage` notifications (the
 *   children's spend, each token once) go on the next tool result as Pi 1.6's `usage`, which Pi
 *   adds to the session's totals (footer, `get_session_stats`); the session's own spend, added up
 *   from its entries, goes to serve as `session_usage` before each tool call and after each turn.
 * - status.ts (issue 45): in a session with a UI that is the top of its tree, serve runs with
 *   `--report-status`; each `status` notification becomes `ctx.ui.setStatus("threadbase", text)`.
 * - Supervision (issue 46): while serve's row watcher has no database connection, a
 *   `supervision` notification precedes each answer; serve.ts adds its text to that tool result
 *   as a last text block (to an error's message), so the session sees it.
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
 * Notices (`{"method": "notice", ...}`: a `thread` child that finished its turn, exited,
 * failed, was stopped by anyone but this session's own `stop`, or was closed as stale; a
 * worker's report for its coordinator; other mailbox messages due to this session) are
 * delivered into the session as a custom message that does not start a turn: the person sees
 * it in the TUI, the model on its next turn. `THREADBASE_NOTICES=off` turns the `thread` tool's
 * off. A session that has used the `thread` tool starts its serve at session start, so notices
 * saved while it was away arrive at once.
 *
 * No dependencies beyond what Pi provides (`typebox` and Node built-ins); Pi loads these files
 * with jiti (relative imports included), so no build step is needed.
 */

import type {
	AgentToolUpdateCallback,
	ExtensionAPI,
	ExtensionContext,
} from "@earendil-works/pi-coding-agent";
import { registerAgentsCommand, registerThreadsCommand } from "./commands.ts";
import type { NoticeParams, SingleDetails, ToolResult } from "./protocol.ts";
import { ServeConnection, untilAborted, type ServeIdentity } from "./serve.ts";
import { ownUsageFirst, reportOwnUsage, withSpend } from "./spend.ts";
import { statusUiOf } from "./status.ts";
import { askParent, enabledContracts, progressText, registers, THREAD_TOOL, TOOLS, type ToolSpec } from "./tools.ts";

// What other code reads of this extension: the tests' driver (tests/it/support/extension_driver.mjs).
export { LineReader } from "./serve.ts";

/** Whether a session's entries hold a result of the `thread` tool (or a notice about one). */
export function usedThreadTool(entries: readonly unknown[]): boolean {
	type Entry = { type?: unknown; customType?: unknown; message?: { role?: unknown; toolName?: unknown; customType?: unknown } };
	const list = entries as ReadonlyArray<Entry | null | undefined>;
	return (
		list.some(
			(e) =>
				e?.type === "message" &&
				((e.message?.role === "toolResult" && e.message?.toolName === THREAD_TOOL) ||
					(e.message?.role === "custom" && e.message?.customType === "threadbase-notice")),
		) || list.some((e) => e?.type === "custom_message" && e.customType === "threadbase-notice")
	);
}

/** What a session runtime's context says about the session a serve speaks for. */
type SessionContext = Pick<ExtensionContext, "sessionManager" | "cwd" | "hasUI" | "ui">;

function identityOf(ctx: SessionContext): ServeIdentity {
	return {
		sessionFile: ctx.sessionManager.getSessionFile(),
		sessionId: ctx.sessionManager.getSessionId(),
		cwd: ctx.cwd,
		statusUi: statusUiOf(ctx),
	};
}

export default function threadbaseExtension(pi: ExtensionAPI) {
	const contracts = enabledContracts();
	// One server per session runtime: this factory runs again after a session switch/fork/new.
	let conn: ServeConnection | undefined;

	function connection(ctx: SessionContext): ServeConnection {
		const identity = identityOf(ctx);
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
		conn.onNotice = (params: NoticeParams) => {
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

	/** One call of a tool of the table, forwarded to serve as its row says. */
	async function forward(
		spec: ToolSpec,
		params: Record<string, unknown>,
		signal: AbortSignal | undefined,
		onUpdate: AgentToolUpdateCallback<unknown> | undefined,
		ctx: SessionContext,
	): Promise<ToolResult> {
		if (signal?.aborted) throw new Error(spec.abortedBefore);
		const c = connection(ctx);
		if (spec.budgeted) await ownUsageFirst(c, ctx, spec.budgeted(params));
		const requestId = c.peekId();
		const onProgress =
			spec.progress && onUpdate
				? (details: SingleDetails) => onUpdate({ content: [{ type: "text", text: progressText(details) }], details })
				: undefined;
		const call = c.request(spec.name, params, onProgress);
		// An abort ends the wait only; the server keeps running and the child is never stopped by it.
		const aborted = spec.abortedWhile?.(params);
		return withSpend(c, await (aborted ? untilAborted(call, signal, aborted, () => c.forget(requestId)) : call));
	}

	for (const spec of TOOLS) {
		if (!registers(spec, contracts)) continue;
		pi.registerTool({
			name: spec.name,
			label: spec.label,
			description: spec.description,
			...(spec.promptSnippet ? { promptSnippet: spec.promptSnippet } : {}),
			...(spec.promptGuidelines ? { promptGuidelines: spec.promptGuidelines } : {}),
			parameters: spec.parameters,
			execute: (_toolCallId, params, signal, onUpdate, ctx) =>
				forward(spec, params as Record<string, unknown>, signal, onUpdate, ctx),
		});
	}

	if (contracts.has("agent")) {
		registerAgentsCommand(pi, connection);
		// Saved notices for this agent are delivered as soon as its session starts.
		pi.on("session_start", async (_event, ctx) => {
			try {
				connection(ctx);
			} catch {
				// the first tool call reports a server that cannot start
			}
		});
	}

	// A session that has used the `thread` tool gets its serve back as soon as it starts again
	// (`pi --session FILE`, `pi -c`): the notices saved while it was away (a thread closed as
	// stale by a restore, one that settled as the last serve ended) arrive at once, and the
	// restore pass runs without waiting for a tool call. A session that never used it starts
	// no serve.
	if (contracts.has("thread")) {
		pi.on("session_start", async (_event, ctx) => {
			try {
				if (!usedThreadTool(ctx.sessionManager.getEntries())) return;
				connection(ctx);
			} catch {
				// the first tool call reports a server that cannot start
			}
		});
	}

	registerThreadsCommand(pi, connection, askParent);

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
