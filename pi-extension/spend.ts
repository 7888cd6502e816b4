/**
 * Spend (issue 28): serve runs with `--report-usage`; its `usage` notifications (the children's
 * spend, each token once) go on the next tool result as Pi 1.6's `usage`, which Pi adds to the
 * session's totals (footer, `get_session_stats`); the session's own spend, added up from its
 * entries, goes to serve as `session_usage` before each tool call and after each turn.
 */

import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import type { Method, PiUsage, SessionUsageAnswer, SessionUsageParams, ToolResult } from "./protocol.ts";
import { TOOLS } from "./tools.ts";

/** The tools this extension forwards to serve (the table's): their results' usage is the children's spend. */
export const THREADBASE_TOOLS: ReadonlySet<string> = new Set(TOOLS.map((t) => t.name));

/** What `reportOwnUsage` needs of a serve connection (serve.ts `ServeConnection`). */
export interface SpendPipe {
	readonly alive: boolean;
	readonly spend: SessionSpend;
	ask<T>(method: Method, params: unknown): Promise<Partial<T>>;
}

/** A session entry as far as its spend goes (Pi's `SessionEntry`, narrowed field by field). */
interface EntryLike {
	type?: unknown;
	usage?: unknown;
	message?: {
		role?: unknown;
		toolName?: unknown;
		usage?: unknown;
		content?: unknown;
	};
}

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0);

const field = (x: object, k: string): unknown => (x as Record<string, unknown>)[k];

function zeroOwn(): SessionUsageParams {
	return { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0, turns: 0, toolCalls: 0 };
}

/**
 * `a` plus the usage `b` (missing or malformed fields count as 0). Pi 1.6 adds a tool result's
 * `usage` to the session's totals (`getSessionStats`: `get_session_stats` in RPC mode, the
 * interactive footer) and keeps it in the session file with the result; serve's `usage`
 * notifications carry the spend of the threads below this session that no earlier one
 * reported, so each child's spend reaches this session's totals once.
 */
export function addUsage(a: PiUsage | undefined, b: unknown): PiUsage | undefined {
	if (!b || typeof b !== "object") return a;
	const base: PiUsage = a ?? {
		input: 0,
		output: 0,
		cacheRead: 0,
		cacheWrite: 0,
		totalTokens: 0,
		cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
	};
	const cost = field(b, "cost");
	const c: object = cost && typeof cost === "object" ? cost : {};
	return {
		input: base.input + num(field(b, "input")),
		output: base.output + num(field(b, "output")),
		cacheRead: base.cacheRead + num(field(b, "cacheRead")),
		cacheWrite: base.cacheWrite + num(field(b, "cacheWrite")),
		totalTokens: base.totalTokens + num(field(b, "totalTokens")),
		cost: {
			input: base.cost.input + num(field(c, "input")),
			output: base.cost.output + num(field(c, "output")),
			cacheRead: base.cost.cacheRead + num(field(c, "cacheRead")),
			cacheWrite: base.cost.cacheWrite + num(field(c, "cacheWrite")),
			total: base.cost.total + num(field(c, "total")),
		},
	};
}

/** One connection's spend bookkeeping: what serve told and no result carried yet; what was reported of this session's own. */
export class SessionSpend {
	/** Spend below this session that serve reported and no tool result has carried yet. */
	private untold: PiUsage | undefined;
	/** The own usage last sent with `session_usage` (its JSON), and whether serve declined it. */
	ownSent = "";
	ownDeclined = false;
	/** How many of the session's entries `ownSum` adds up, and the last of them. */
	ownCounted = 0;
	ownLast: unknown = undefined;
	ownSum: SessionUsageParams = zeroOwn();

	/** A `usage` notification's usage. */
	heard(usage: unknown): void {
		this.untold = addUsage(this.untold, usage);
	}

	/** The untold spend, now told (the caller puts it on the tool result it returns). */
	take(): PiUsage | undefined {
		const u = this.untold;
		this.untold = undefined;
		return u;
	}
}

/** `result` with the connection's untold spend as its `usage` (none: returned as it is). */
export function withSpend(c: { spend: SessionSpend }, result: ToolResult): ToolResult {
	const usage = c.spend.take();
	if (usage) result.usage = usage;
	return result;
}

/**
 * Adds the own spend of `entries` from index `from` on to `u`, and returns `u`: this session's
 * own spend, as Pi's session stats add it up (assistant messages, `usage` entries, compactions
 * and branch summaries, tool results' own usage) but without the results of this extension's
 * tools (the children's spend, which their own rows count); `turns` are assistant messages
 * and `toolCalls` their tool calls.
 */
function addOwnUsage(entries: readonly unknown[], from: number, u: SessionUsageParams): SessionUsageParams {
	const add = (x: unknown) => {
		if (!x || typeof x !== "object") return;
		u.input += num(field(x, "input"));
		u.output += num(field(x, "output"));
		u.cacheRead += num(field(x, "cacheRead"));
		u.cacheWrite += num(field(x, "cacheWrite"));
		const cost = field(x, "cost");
		u.cost += num(cost && typeof cost === "object" ? field(cost, "total") : undefined);
	};
	for (let i = from; i < entries.length; i++) {
		const e = entries[i] as EntryLike | null | undefined;
		if (e?.type === "usage") add(e.usage);
		else if ((e?.type === "compaction" || e?.type === "branch_summary") && e.usage) add(e.usage);
		if (e?.type !== "message") continue;
		const m = e.message;
		if (m?.role === "assistant") {
			u.turns += 1;
			if (Array.isArray(m.content)) {
				u.toolCalls += m.content.filter((b: unknown) => !!b && typeof b === "object" && field(b, "type") === "toolCall").length;
			}
			add(m.usage);
		} else if (m?.role === "toolResult" && m.usage && !THREADBASE_TOOLS.has(String(m.toolName))) {
			add(m.usage);
		}
	}
	return u;
}

/** The session's entries, when Pi's session manager lists them. */
function entriesOf(ctx: Pick<ExtensionContext, "sessionManager"> | undefined): unknown[] | undefined {
	const manager = ctx?.sessionManager as { getEntries?: () => unknown } | undefined;
	const entries = manager?.getEntries?.();
	return Array.isArray(entries) ? entries : undefined;
}

/**
 * Tells serve this (root) session's own spend (`session_usage`), so `threadbase usage` and the
 * budgets count it with the tree's threads; only when it changed since the last report, and
 * never again once serve declined it (a managed child's serve: its thread's row counts it).
 * Never throws: the spend is reported again on the next call.
 */
export async function reportOwnUsage(c: SpendPipe, ctx: Pick<ExtensionContext, "sessionManager"> | undefined): Promise<void> {
	const s = c.spend;
	if (!c.alive || s.ownDeclined) return;
	let own: SessionUsageParams;
	try {
		const entries = entriesOf(ctx);
		if (!entries) return;
		// Entries are only appended: go on from the last one counted while it is still in place
		// (a long session is not summed again at every tool call), else count them all again.
		const n = s.ownCounted;
		const from = n > 0 && entries.length >= n && entries[n - 1] === s.ownLast ? n : 0;
		const base = from > 0 ? { ...s.ownSum } : zeroOwn();
		own = addOwnUsage(entries, from, base);
		s.ownCounted = entries.length;
		s.ownLast = entries[entries.length - 1];
		s.ownSum = { ...own };
	} catch {
		return;
	}
	const key = JSON.stringify(own);
	if (key === s.ownSent) return;
	s.ownSent = key;
	try {
		const r = await c.ask<SessionUsageAnswer>("session_usage", own);
		if (r.recorded === false) s.ownDeclined = true;
	} catch {
		s.ownSent = "";
	}
}

/**
 * Reports the session's own spend before a call: awaited when the call may be refused by a
 * budget (its check must count the session's turns), else sent on the same pipe ahead of the
 * call without waiting for its answer, so a `poll`, `list` or `wait` pays no extra round trip.
 */
export async function ownUsageFirst(
	c: SpendPipe,
	ctx: Pick<ExtensionContext, "sessionManager"> | undefined,
	budgeted: boolean,
): Promise<void> {
	if (budgeted) await reportOwnUsage(c, ctx);
	else void reportOwnUsage(c, ctx);
}
