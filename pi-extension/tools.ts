/**
 * The tools this extension registers, from one table (`TOOLS`): each row names the tool, its
 * description and parameter schema (what the model sees), the contract it belongs to
 * (`THREADBASE_TOOLS` picks the contracts), and how a call is forwarded to serve: which calls
 * report the session's own spend first and wait for it (a budget may refuse them), what an
 * abort before and during the call says, and whether `wait`'s progress is shown. Serve
 * validates every call strictly; the schemas describe.
 */

import { Type, type TSchema } from "typebox";
import type { SingleDetails, Snapshot, ToolMethod } from "./protocol.ts";

/** Which `THREADBASE_TOOLS` word registers a tool (`answer`: THREADBASE_UI=parent, with `thread` or `agent`). */
export type Contract = "thread" | "agent" | "worker" | "answer";

/** A tool's name, description and parameter schema. */
interface Schema {
	name: ToolMethod;
	description: string;
	parameters: TSchema;
}

/** One row of the table: what Pi shows the model, and how a call goes to serve. */
export interface ToolSpec extends Schema {
	label: string;
	contract: Contract;
	promptSnippet?: string;
	promptGuidelines?: string[];
	/**
	 * Whether the session's own spend goes to serve first (spend.ts `ownUsageFirst`), and
	 * whether the call waits for that (a budget may refuse the call, so its check must count
	 * the session's turns). Absent: not reported.
	 */
	budgeted?: (params: Record<string, unknown>) => boolean;
	/** The error of a call whose abort signal fired before it ran. */
	abortedBefore: string;
	/**
	 * The error when the signal fires while the call runs (the call is forgotten; serve keeps
	 * running it); undefined: the call runs to its result.
	 */
	abortedWhile?: (params: Record<string, unknown>) => string | undefined;
	/** `wait`'s progress notifications become tool updates (`progressText`). */
	progress?: boolean;
}

// ---- contract A: the `thread` tool (pi-threads) --------------------------------------------

/** The contract A tool's name. */
export const THREAD_TOOL = "thread";

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

// ---- THREADBASE_UI=parent: `thread_answer` -------------------------------------------------

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

// ---- contract C: the worker tools ------------------------------------------------------------

const Str = (description: string) => Type.String({ description });

/** The worker tools (contract C): name, parameters, description. */
const WORKER_TOOLS: readonly Schema[] = [
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
];

// ---- contract B: the subagent lifecycle -------------------------------------------------------

/** The subagent lifecycle tools (contract B): name, parameters, description. */
const AGENT_TOOLS: readonly Schema[] = [
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
];

// ---- `wait` progress ----------------------------------------------------------------------------

/**
 * The text shown for a wait progress update, as pi-threads writes it (`formatWaitProgress`):
 * `Waiting <ms>ms for "<title>".`, then `Path:`, `Status:`, `Running:` and `Next:`, from the
 * progress details' snapshot (serve's `contract::format` writes the same lines).
 */
export function progressText(details: SingleDetails | undefined): string {
	const snap: Partial<Snapshot> = details?.snapshot ?? details?.thread ?? {};
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
function threadTitle(snap: Partial<Snapshot>): string {
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
function threadStatus(snap: Partial<Snapshot>): string {
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
/** Contract B's error for an `agent_wait` or `agent_spawn` aborted while it waits. */
const AGENT_WAIT_CANCELLED = "Waiting cancelled; thread remains running";

const named = (...names: string[]) => (params: Record<string, unknown>) => names.includes(String(params.action));

/**
 * Every tool, in the order they are registered. `thread`: pi-threads' texts (a call whose
 * signal fired before it ran fails with `Thread action aborted`, whatever the action; once
 * running, only a `wait` heeds the signal, and every other action runs to its result, as the
 * original's do); the session's own spend first, so a start's budget check counts its turns.
 * `agent_*`: every call heeds the signal; `threads_*`: none does once running.
 */
export const TOOLS: readonly ToolSpec[] = [
	...WORKER_TOOLS.map(
		(t): ToolSpec => ({
			...t,
			label: t.name,
			contract: "worker",
			budgeted: () => t.name === "threads_spawn" || t.name === "threads_send",
			abortedBefore: `${t.name} aborted`,
		}),
	),
	...AGENT_TOOLS.map((t): ToolSpec => {
		const cancelled = t.name === "agent_wait" || t.name === "agent_spawn" ? AGENT_WAIT_CANCELLED : `${t.name} aborted`;
		return {
			...t,
			label: t.name,
			contract: "agent",
			budgeted: () => t.name === "agent_spawn" || t.name === "agent_steer",
			abortedBefore: cancelled,
			abortedWhile: () => cancelled,
		};
	}),
	{
		name: THREAD_TOOL,
		label: "Thread",
		contract: "thread",
		description: TOOL_DESCRIPTION,
		promptSnippet: PROMPT_SNIPPET,
		promptGuidelines: PROMPT_GUIDELINES,
		parameters: ThreadParams,
		budgeted: named("start", "fork", "resume", "send"),
		abortedBefore: THREAD_ACTION_ABORTED,
		abortedWhile: (params) => (params.action === "wait" ? THREAD_WAIT_ABORTED : undefined),
		progress: true,
	},
	// Issue 30: with THREADBASE_UI=parent, a child's question waits for this session's answer,
	// given with a second tool (the `thread` tool's actions are the contract's).
	{
		name: ANSWER_TOOL,
		label: "Thread answer",
		contract: "answer",
		description: ANSWER_DESCRIPTION,
		parameters: AnswerParams,
		abortedBefore: `${ANSWER_TOOL} aborted`,
	},
];

/** The contracts whose tools this extension registers (THREADBASE_TOOLS; default `thread`). */
export function enabledContracts(): Set<string> {
	const raw = process.env.THREADBASE_TOOLS?.trim();
	const names = (raw ? raw.split(",") : ["thread"]).map((s) => s.trim().toLowerCase()).filter(Boolean);
	return new Set(names);
}

/** Whether `spec` is registered with the contracts `on` (`thread_answer`: THREADBASE_UI=parent with `thread` or `agent`). */
export function registers(spec: ToolSpec, on: Set<string>): boolean {
	if (spec.contract === "answer") return (on.has("thread") || on.has("agent")) && askParent();
	return on.has(spec.contract);
}
