//! The detail of the selected thread as lines: what the view draws and the app scrolls.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

/// The selected thread's snapshot `s` as lines: path and id, name, state, and what follows.
pub(super) fn detail_lines(s: &Value) -> Vec<Line<'static>> {
    let t = |k: &str| s[k].as_str().unwrap_or("").to_string();
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut out = vec![
        Line::from(vec![
            Span::styled(t("path"), bold),
            Span::raw(format!("  {}", t("id"))),
        ]),
        Line::from(format!(
            "{} · task {} · {}/{}{}{}",
            t("name"),
            t("taskName"),
            t("status"),
            t("phase"),
            s["exit"]["kind"]
                .as_str()
                .map(|k| format!(" ({k})"))
                .unwrap_or_default(),
            s["pid"]
                .as_i64()
                .map(|p| format!(" · pid {p}"))
                .unwrap_or_default(),
        )),
        Line::from(format!(
            "result ({}): {}",
            s["result"]["status"].as_str().unwrap_or("none"),
            s["resultSummary"].as_str().unwrap_or("-")
        )),
    ];
    if let Some(n) = s["queuePosition"].as_i64() {
        out.push(Line::from(format!(
            "queued: position {n} (THREADBASE_QUEUE=1); launched when a slot frees"
        )));
    }
    if let Some(q) = s.get("question").filter(|q| q.is_object()) {
        let mut text = format!(
            "question ({}): {}",
            q["kind"].as_str().unwrap_or("?"),
            q["title"].as_str().unwrap_or("")
        );
        if let Some(m) = q["message"].as_str() {
            text.push_str(&format!(" — {m}"));
        }
        if let Some(o) = q["options"].as_array() {
            let o: Vec<&str> = o.iter().filter_map(Value::as_str).collect();
            text.push_str(&format!(" [{}]", o.join(" | ")));
        }
        out.push(Line::styled(text, bold));
        out.push(Line::from("  a answers it (yes/no for a confirm)"));
    }
    // Issue 48: an isolated thread's worktree (`threadbase diff` shows what it changed).
    if let Some(w) = s.get("worktree").filter(|w| w.is_object()) {
        out.push(Line::from(format!(
            "worktree: {} (branch {}){}",
            w["path"].as_str().unwrap_or(""),
            w["branch"].as_str().unwrap_or(""),
            w["removedAt"]
                .as_str()
                .map(|at| format!(", removed {at}"))
                .unwrap_or_else(|| " · threadbase diff shows its changes".into())
        )));
    }
    if let Some(evs) = s["recentEvents"].as_array() {
        out.push(Line::styled("recent events", bold));
        for e in evs.iter().rev().take(5).rev() {
            let at = e["at"].as_str().unwrap_or("");
            let time = at.get(11..19).unwrap_or(at);
            let extra = ["text", "message", "phase", "reason"]
                .iter()
                .find_map(|k| e[*k].as_str())
                .map(|x| format!(" {}", x.replace('\n', " ")))
                .unwrap_or_default();
            out.push(Line::from(format!(
                "  {time} {}{extra}",
                e["type"].as_str().unwrap_or("?")
            )));
        }
    }
    for (key, label, keep) in [
        ("outputTail", "output tail", 6),
        ("stderrTail", "stderr tail", 4),
    ] {
        if let Some(text) = s[key].as_str().filter(|x| !x.is_empty()) {
            out.push(Line::styled(label, bold));
            let lines: Vec<&str> = text.lines().collect();
            for l in &lines[lines.len().saturating_sub(keep)..] {
                out.push(Line::from(format!("  {l}")));
            }
        }
    }
    out
}
