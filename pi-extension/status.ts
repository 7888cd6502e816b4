/**
 * The status line (issue 45): in a session with a UI that is the top of its tree, serve runs
 * with `--report-status`; each `status` notification (the tree's threads by condition and its
 * spend, sent when it changes) becomes `ctx.ui.setStatus("threadbase", text)`, shown in Pi's
 * footer (`undefined`, which removes the entry, when there is nothing to show or no serve).
 */

import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import type { StatusParams } from "./protocol.ts";

/** The key of the status entry this extension keeps in Pi's footer. */
export const STATUS_KEY = "threadbase";

/** What the status line needs of Pi's extension UI (`ctx.ui`). */
export interface StatusUi {
	setStatus(key: string, text: string | undefined): void;
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
export function statusUiOf(ctx: Pick<ExtensionContext, "hasUI" | "ui"> | undefined): StatusUi | undefined {
	const managed = (process.env.PI_THREADS_SELF_ID ?? "").trim() !== "" || Number(process.env.PI_THREADS_DEPTH ?? 0) > 0;
	if (managed || !ctx?.hasUI) return undefined;
	const ui: Partial<StatusUi> | undefined = ctx.ui;
	return typeof ui?.setStatus === "function" ? (ui as StatusUi) : undefined;
}
