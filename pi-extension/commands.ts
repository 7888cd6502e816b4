/**
 * The commands this extension registers, over the same serve connection as its tools:
 *
 * - `/threads` browses this session's threads with Pi's dialogs (select, confirm, notify): list
 *   (per level, via `parent`), poll summary, refresh, children, and stop after a confirmation;
 *   with THREADBASE_UI=parent also a child's question, answered with `thread_answer`. No
 *   start/send (contract A's `/threads` command boundary): those stay tool-level primitives.
 *   Each thread's state words come from serve (`thread.states`), spelled as every surface
 *   spells them.
 * - `/agents reap` (with the `agent` tools): counts the completed subagents that can be
 *   forgotten, asks, forgets them.
 */

import type { ExtensionAPI, ExtensionCommandContext, ExtensionUIContext } from "@earendil-works/pi-coding-agent";
import type {
	AnswerParams,
	ListedDetails,
	Question,
	ReapAnswer,
	ReapParams,
	SingleDetails,
	Snapshot,
	StatesAnswer,
	StatesParams,
	ThreadParams,
	ToolResult,
} from "./protocol.ts";
import { errorText, type ServeConnection } from "./serve.ts";
import { ANSWER_TOOL, THREAD_TOOL } from "./tools.ts";

/** The connection of the session a command runs in (index.ts starts it when needed). */
export type ConnectionOf = (ctx: ExtensionCommandContext) => ServeConnection;

/** What the browser needs of Pi's dialogs. */
type Dialogs = Pick<ExtensionUIContext, "select" | "confirm" | "input" | "editor" | "notify">;

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

/** A `thread` call; `answer`: a `thread_answer` call. */
type ThreadCall = (params: ThreadParams) => Promise<ToolResult>;
type AnswerCall = (params: AnswerParams) => Promise<ToolResult>;
/** Serve's state words of these thread ids, in their order. */
type StatesCall = (params: StatesParams) => Promise<Partial<StatesAnswer>>;

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

/** One `/threads` option per thread: `path  state  name`, its state in serve's words. */
function threadOption(snap: Partial<Snapshot>, state: string): string {
	const name = typeof snap.name === "string" && snap.name && snap.name !== snap.taskName ? `  ${snap.name}` : "";
	// Issue 30: a thread waiting in the queue, or waiting for an answer, says so.
	const queued = typeof snap.queuePosition === "number" ? `  queued #${snap.queuePosition}` : "";
	const asks = snap.question ? `  ? ${snap.question.kind}` : "";
	return `${snap.path ?? snap.id ?? "?"}  ${state}${queued}${asks}${name}`;
}

/**
 * Asks the user a child's question (THREADBASE_UI=parent) with the dialog of its kind; the
 * answer goes to `thread_answer`. `undefined`: the user dismissed the dialog (nothing is sent).
 */
export async function askUser(ui: Dialogs, q: Partial<Question> | undefined): Promise<string | boolean | undefined> {
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

/** A list's threads, as `withAliases` (serve.ts) set them. */
function listedThreads(details: unknown): { threads: Snapshot[]; d: Partial<ListedDetails> } {
	const d: Partial<ListedDetails> = details && typeof details === "object" ? details : {};
	return { threads: Array.isArray(d.threads) ? d.threads : [], d };
}

/**
 * `/threads`: lists the current level's threads (`list` with `parent`: `.` at the top, else the
 * thread whose children are shown), and for a picked thread shows its `poll` summary with the
 * actions Refresh, Children, Stop (live threads only, after a confirmation) and Back. There is
 * deliberately no way to start threads or send to them from here (contract: `/threads` command
 * boundary); those stay tool-level primitives.
 */
async function browseThreads(
	ctx: Pick<ExtensionCommandContext, "hasUI" | "ui">,
	call: ThreadCall,
	states: StatesCall,
	answer?: AnswerCall,
): Promise<void> {
	const ui: Dialogs = ctx.ui;
	if (!ctx.hasUI) return;
	/** Paths whose children are shown; empty: this session's own children. */
	const levels: string[] = [];
	for (;;) {
		const parent = levels.length ? levels[levels.length - 1]! : ".";
		let threads: Snapshot[];
		let d: Partial<ListedDetails>;
		let words: Array<string | null>;
		try {
			({ threads, d } = listedThreads((await call({ action: "list", parent })).details));
			const said = await states({ ids: threads.map((t) => String(t.id)) });
			words = Array.isArray(said.states) ? said.states : [];
		} catch (e) {
			ui.notify(`threads: list failed: ${errorText(e)}`, "error");
			if (!levels.length) return;
			levels.pop();
			continue;
		}
		const byOption = new Map<string, Snapshot>();
		threads.forEach((t, i) => byOption.set(threadOption(t, words[i] ?? "?"), t));
		const options: string[] = [...byOption.keys(), THREADS_UI.refresh];
		if (levels.length) options.push(THREADS_UI.up);
		options.push(THREADS_UI.close);
		const where = levels.length ? `Threads under ${parent}` : "Threads of this session";
		const counts = `${threads.length} (${d.liveCount ?? 0} live, ${d.closedCount ?? 0} closed)`;
		const choice = await ui.select(`${where}: ${counts}`, options);
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
async function showThread(ui: Dialogs, call: ThreadCall, path: string, answer?: AnswerCall): Promise<"back" | "children"> {
	for (;;) {
		let polled: ToolResult;
		try {
			polled = await call({ action: "poll", id: path, detail: "summary" });
		} catch (e) {
			ui.notify(`threads: poll ${path} failed: ${errorText(e)}`, "error");
			return "back";
		}
		const details = polled.details as Partial<SingleDetails> | undefined;
		const snap: Partial<Snapshot> = details?.snapshot ?? {};
		const state = `${path} is ${snap.status ?? "?"}/${snap.phase ?? "?"}`;
		// The poll summary is shown once, as a notification; the dialog's title only names the
		// thread and its state.
		ui.notify(clip(resultText(polled) || state), "info");
		const actions: string[] = [THREADS_UI.actionRefresh, THREADS_UI.actionChildren];
		if (snap.question && answer) actions.unshift(THREADS_UI.actionAnswer);
		if (snap.status === "live") actions.push(THREADS_UI.actionStop);
		actions.push(THREADS_UI.actionBack);
		const choice = await ui.select(`${state}: choose an action`, actions);
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
			const yes = await ui.confirm(
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

/** Registers `/threads`; `withAnswer`: whether a child's question can be answered (THREADBASE_UI=parent), asked at each run. */
export function registerThreadsCommand(pi: ExtensionAPI, connectionOf: ConnectionOf, withAnswer: () => boolean): void {
	pi.registerCommand("threads", {
		description: "Browse this session's threads: status, summary, children, stop.",
		handler: async (_args, ctx) => {
			await browseThreads(
				ctx,
				(params) => connectionOf(ctx).request(THREAD_TOOL, params),
				(params) => connectionOf(ctx).ask<StatesAnswer>("thread.states", params),
				withAnswer() ? (params) => connectionOf(ctx).request(ANSWER_TOOL, params) : undefined,
			);
		},
	});
}

/** Registers `/agents reap`: count the completed subagents that can be forgotten, ask, forget them. */
export function registerAgentsCommand(pi: ExtensionAPI, connectionOf: ConnectionOf): void {
	pi.registerCommand("agents", {
		description: "Subagents: /agents reap forgets completed subagents with nothing working beneath them (asks first).",
		handler: async (args, ctx) => {
			const ui = ctx.ui;
			const words = String(args ?? "").trim().split(/\s+/).filter(Boolean);
			if (words[0] !== "reap" || words.length > 1) {
				ui.notify("Usage: /agents reap", "info");
				return;
			}
			try {
				const c = connectionOf(ctx);
				const dryRun: ReapParams = { dryRun: true };
				const probe = await c.ask<ReapAnswer>("agents.reap", dryRun);
				const count = probe.count ?? 0;
				if (count === 0) {
					ui.notify("No completed subagents to reap.", "info");
					return;
				}
				const noun = count === 1 ? "subagent" : "subagents";
				const choice = await ui.select(
					`Reap ${count} completed ${noun}? They are forgotten and cannot be resumed; their session files stay.`,
					["Confirm", "Cancel"],
				);
				if (choice !== "Confirm") {
					ui.notify("Reap cancelled.", "info");
					return;
				}
				const reap: ReapParams = {};
				const done = await c.ask<ReapAnswer>("agents.reap", reap);
				const n = done.count ?? 0;
				ui.notify(`Reaped ${n} ${n === 1 ? "subagent" : "subagents"}.`, "info");
			} catch (e) {
				ui.notify(`agents reap failed: ${errorText(e)}`, "error");
			}
		},
	});
}
