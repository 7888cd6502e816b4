/**
 * What crosses the pipe between this extension and `threadbase serve` (docs/serve-protocol.md):
 * one JSON object per line, LF only. Requests go down; response lines, a list's part lines
 * (`--wire compact`) and notifications (`progress`, `notice`, `usage`, `status`) come up.
 * Types only: nothing here runs.
 */

// ---- requests ----------------------------------------------------------------------------

/** The model tools serve answers (DESIGN's method list; `thread_answer` with THREADBASE_UI=parent). */
export type ToolMethod =
	| "thread"
	| "thread_answer"
	| "agent_spawn"
	| "agent_wait"
	| "agent_steer"
	| "agent_status"
	| "agent_update"
	| "agent_pause"
	| "agent_stop"
	| "agent_output"
	| "threads_spawn"
	| "threads_list"
	| "threads_send"
	| "threads_interrupt"
	| "threads_hide"
	| "threads_report";

/** Methods only this extension sends: `/agents reap`, the session's own spend, `/threads`' state words. */
export type InternalMethod = "agents.reap" | "session_usage" | "thread.states";

export type Method = ToolMethod | InternalMethod;

/** `{"id": n, "method": …, "params": {…}}`. */
export interface Request {
	id: number;
	method: Method;
	params: unknown;
}

/** The `thread` tool's parameters (contract A; serve checks each action's fields strictly). */
export interface ThreadParams {
	action: "start" | "list" | "poll" | "send" | "stop" | "wait" | "resume" | "fork" | "archive";
	[field: string]: unknown;
}

/** `thread_answer {id, answer}`. */
export interface AnswerParams {
	id: string;
	answer: string | boolean;
}

/** `agents.reap {dryRun?}`. */
export interface ReapParams {
	dryRun?: boolean;
}

/** `session_usage`: this session's own cumulative spend (see spend.ts). */
export interface SessionUsageParams {
	input: number;
	output: number;
	cacheRead: number;
	cacheWrite: number;
	cost: number;
	turns: number;
	toolCalls: number;
}

/** `thread.states {ids}`: the state words of these threads, as every surface spells them. */
export interface StatesParams {
	ids: string[];
}

// ---- answers -----------------------------------------------------------------------------

export interface TextContent {
	type: "text";
	text: string;
}

/** A `{content, details}` result: the `thread` tool's, contract B's (`terminate` on `agent_pause`). */
export interface ShapedResult {
	content: TextContent[];
	details?: unknown;
	terminate?: boolean;
}

/** `{"id": n, "result": …}`: a shaped result, or (contract C, the internal methods) a plain JSON value. */
export interface ResultLine {
	id: number;
	result?: ShapedResult | Record<string, unknown> | null;
}

/** serve's error codes (DESIGN). */
export type ErrorCode =
	| "invalid_params"
	| "unknown_reference"
	| "ambiguous_reference"
	| "conflict"
	| "limit"
	| "forbidden"
	| "closed"
	| "not_resumable"
	| "io"
	| "internal";

/** `{"id": n, "error": {code, message}}` (`id` null for a line serve could not read). */
export interface ErrorLine {
	id: number | null;
	error: { code?: ErrorCode; message?: string };
}

/** `--wire compact`: `{"id": n, "part": [snapshot, …]}`, more of the list the response line carries. */
export interface PartLine {
	id: number;
	part: Snapshot[];
}

/** What the tool call returns to Pi. */
export interface ToolResult {
	content: TextContent[];
	details: unknown;
	terminate?: boolean;
	/** Pi 1.6: spend of this tool call, added to the session's totals (see spend.ts `addUsage`). */
	usage?: PiUsage;
}

/** A usage object as Pi 1.6 writes one (pi-ai's `Usage`); serve's `usage` notifications carry one. */
export interface PiUsage {
	input: number;
	output: number;
	cacheRead: number;
	cacheWrite: number;
	totalTokens: number;
	cost: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number };
}

// ---- contract A's results, the parts this extension reads ---------------------------------

/** A pending question of a child (THREADBASE_UI=parent). */
export interface Question {
	id?: number;
	threadId?: string;
	kind: "confirm" | "select" | "input" | "editor";
	title?: string;
	message?: string;
	options?: string[];
	askedAt?: string;
}

/** A closed thread's exit. */
export interface Exit {
	kind: "exited" | "stopped" | "failed" | "stale";
	code?: number | null;
	signal?: string | null;
	message?: string | null;
}

/** Contract A's `ThreadRuntimeSnapshot` (the fields read here; the rest passes through). */
export interface Snapshot {
	id: string;
	path: string;
	name?: string;
	taskName?: string;
	status: "live" | "closed";
	phase: string;
	running?: boolean;
	pid?: number;
	exit?: Exit;
	session?: { kind: string; name?: string | null };
	nextSuggestedActions?: string[];
	queuePosition?: number;
	question?: Question;
	/** `resultSummary` is `result.text`; `--wire compact` sends it as `0` (see serve.ts `withAliases`). */
	result?: { text?: string };
	resultSummary?: string | 0;
	[field: string]: unknown;
}

/** `list`'s details; with `--wire compact` `threads` and `snapshots` arrive as `0`. */
export interface ListedDetails {
	kind: "listed";
	threads: Snapshot[] | 0;
	snapshots: Snapshot[] | 0;
	liveCount?: number;
	closedCount?: number;
	[field: string]: unknown;
}

/** A single-thread result's details (`poll`, `stop`, …) and `wait`'s progress (`waitedMs`). */
export interface SingleDetails {
	kind: string;
	snapshot?: Snapshot;
	thread?: Snapshot;
	waitedMs?: number;
	[field: string]: unknown;
}

/** `agents.reap`'s answer. */
export interface ReapAnswer {
	dryRun?: boolean;
	count: number;
}

/** `session_usage`'s answer: `false` for a managed child's serve (its thread's row counts it). */
export interface SessionUsageAnswer {
	recorded: boolean;
}

/** `thread.states`' answer: each id's state words (`live/busy`, `closed/failed`, …), null for an unknown id. */
export interface StatesAnswer {
	states: Array<string | null>;
}

// ---- notifications ------------------------------------------------------------------------

/** `{"method": "progress", "params": {requestId, details}}` while a `wait` runs. */
export interface ProgressNotification {
	method: "progress";
	params: { requestId: number; details: SingleDetails };
}

/** A mailbox message due to this session (a thread's settle, exit, failure, stop; a report; a recap). */
export interface NoticeParams {
	threadId?: string;
	path?: string;
	kind?: string;
	messageId?: number;
	text?: string;
	createdAt?: string;
	[field: string]: unknown;
}

export interface NoticeNotification {
	method: "notice";
	params: NoticeParams;
}

/** `--report-usage`: the spend below this session since the last one, for the next tool result. */
export interface UsageNotification {
	method: "usage";
	params: { requestId: number; usage: PiUsage };
}

/**
 * `--report-status`: the status line of this session's whole tree (`threads: 2 busy · 1 asking
 * · 1 failed · $0.42`; `""` when there is nothing to show), the counts by condition (a live
 * thread's attention word, else its phase; closed threads only as `failed`; zeros left out),
 * and what the tree spent.
 */
export interface StatusParams {
	text: string;
	counts: Record<string, number>;
	costUsd: number;
	tokens: number;
}

export interface StatusNotification {
	method: "status";
	params: StatusParams;
}

/**
 * Issue 46: sent before each answer while serve's row watcher (or its heartbeat) has no
 * database connection: what is not running, since when, why, and `text` (ending in a `Repair:`).
 */
export interface SupervisionParams {
	requestId: number;
	running: false;
	since: string;
	reason: string;
	parts: string[];
	text: string;
}

export interface SupervisionNotification {
	method: "supervision";
	params: SupervisionParams;
}

export type Notification =
	| ProgressNotification
	| NoticeNotification
	| UsageNotification
	| StatusNotification
	| SupervisionNotification;

/** Every line serve writes on stdout. */
export type ServeLine = ResultLine | ErrorLine | PartLine | Notification;
