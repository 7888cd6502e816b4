//! `threadbase usage [REF]`: what each thread and each subtree spent, as the whole tree of
//! each root session (every manager in it), or the subtree of one thread. A tree's total
//! counts the root session's own turns too (`session_usage`, reported by its Pi extension),
//! and the text says so on a line of its own. One query per tree:
//! the `subtree_usage` view pushed down to the tree's key range.

use crate::domain::{AgentState, Contract, Phase, SessionId, ThreadStatus};
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::sql::write_table;
pub use crate::engine::budget::{budget_text, summary};
use crate::engine::budget::{thousands, usd, Budget};
use crate::error::Result;
use crate::store::hosts::{Placements, ThreadRowRef};
use crate::store::open_read_only;
use crate::store::usage::{self, trees, SubtreeUsage, TreeUsage, Usage};
use crate::store::Conn;

/// One thread of a tree with its own and its subtree's figures.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageRow {
    pub id: String,
    pub path: String,
    pub manager_session: String,
    pub contract: Contract,
    /// 1 at the top of the tree.
    pub level: i64,
    /// The thread it hangs under (in this or another manager).
    pub forest_parent_id: Option<String>,
    pub status: ThreadStatus,
    pub phase: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_state: Option<AgentState>,
    /// The state in words ([`crate::domain::state_words`]), as the text shows it.
    pub state: String,
    pub name: String,
    /// Issue 33: the host that holds (or held) it, when the database records one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub usage: Usage,
    pub subtree: SubtreeUsage,
    /// Issue 49: the cap on this thread it is nearest to, and how much of it it used (none
    /// without a cap per thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap: Option<CapDoc>,
}

/// A thread's cap and its use, as `usage` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapDoc {
    /// `the thread cap THREADBASE_THREAD_BUDGET_TOKENS=1,000` or `the database's thread
    /// budget of 5 turns`.
    pub name: String,
    /// `tokens`, `usd` or `turns`.
    pub kind: &'static str,
    pub limit: f64,
    pub used: f64,
    pub fraction: f64,
    /// `950 tokens of 1,000 tokens (95%)`.
    pub text: String,
}

impl CapDoc {
    fn nearest(caps: &[crate::engine::budget::Cap], u: &Usage) -> Option<CapDoc> {
        use crate::engine::budget::CapKind;
        let c = caps
            .iter()
            .map(|c| c.using(u))
            .max_by(|a, b| a.fraction().total_cmp(&b.fraction()))?;
        Some(CapDoc {
            name: c.cap.name(),
            kind: match c.cap.kind {
                CapKind::Tokens => "tokens",
                CapKind::Usd => "usd",
                CapKind::Turns => "turns",
            },
            limit: c.cap.value,
            used: c.used,
            fraction: c.fraction(),
            text: c.used_text(),
        })
    }
}

/// The rows of `root`'s tree whose keys are `key` or below it (`None`: the whole tree), in
/// tree order, with each state in words.
/// `placements` says where each is held (issue 33): a live thread of a host whose lease ran
/// out reads `live/host unreachable since T`, and one of another host is never "owner gone".
pub fn tree_rows(
    conn: &Conn,
    root: &SessionId,
    key: Option<&str>,
    placements: &Placements,
) -> Result<Vec<UsageRow>> {
    Ok(usage::tree_rows(conn, root, key)?
        .into_iter()
        .map(|r| UsageRow {
            state: match placements.unreachable_since(&r.id, r.status == ThreadStatus::Live) {
                Some(since) => format!(
                    "live/host unreachable since {}",
                    super::forest::short_time(since)
                ),
                None => crate::domain::state_words(
                    r.status,
                    r.phase,
                    r.exit_kind,
                    r.exit_code,
                    r.exit_signal.is_some(),
                    placements
                        .need_of(&ThreadRowRef {
                            id: &r.id,
                            live: r.status == ThreadStatus::Live,
                            owner_pid: r.owner_pid,
                            owner_started_at: r.owner_started_at,
                            last_event_at: None,
                        })
                        .map(|n| n.attention),
                ),
            },
            host: placements.host_of(&r.id).map(str::to_string),
            id: r.id,
            path: r.path,
            manager_session: r.manager_session,
            contract: r.contract,
            level: r.level,
            forest_parent_id: r.forest_parent_id,
            status: r.status,
            phase: r.phase,
            agent_state: r.agent_state,
            name: r.name,
            usage: r.usage,
            subtree: r.subtree,
            cap: None,
        })
        .collect())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TreeDoc<'a> {
    #[serde(flatten)]
    total: &'a TreeUsage,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget: Option<BudgetDoc>,
    /// The database's tree cap (`threadbase budget`, issue 33), when one is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    tree_budget: Option<TreeBudgetDoc>,
    /// The thread asked for (`usage REF`): the rows are its subtree.
    #[serde(skip_serializing_if = "Option::is_none")]
    thread: Option<&'a str>,
    rows: &'a [UsageRow],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TreeBudgetDoc {
    tokens: Option<i64>,
    usd: Option<f64>,
    reached: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BudgetDoc {
    tokens: Option<i64>,
    usd: Option<f64>,
    /// The cap this tree has reached (its variable), if any.
    reached: Option<&'static str>,
}

pub fn run(
    db: &Path,
    reference: Option<&str>,
    within: super::select::Within<'_>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let conn = open_read_only(db)?;
    if !crate::store::usage::has_tables(&conn)? {
        return Err(crate::store::usage::not_migrated());
    }
    let budget = Budget::from_env(&|k| std::env::var(k).ok())?;
    let kept = match crate::store::budgets::has_table(&conn)? {
        true => crate::store::budgets::read(&conn)?,
        false => Default::default(),
    };
    let thread_caps = crate::engine::budget::thread_caps(&budget, &kept);
    let mut selected: Vec<(TreeUsage, Option<String>, Vec<UsageRow>)> = Vec::new();
    let session = super::select::selected_session(&conn, within.session)?;
    // Newest session first (their start times and names, for the headings too).
    let infos = crate::store::sessions::infos(&conn)?;
    let placements = Placements::read(&conn)?;
    let mut all = trees(&conn)?;
    all.sort_by_key(|t| infos.iter().position(|i| i.root_session == t.root_session));
    match reference {
        Some(r) => {
            let t =
                crate::store::refs::resolve_anywhere(&conn, r, within.manager, session.as_ref())?;
            let (root, key) = usage::place_of(&conn, &t.id)?;
            let total = all
                .into_iter()
                .find(|u| u.root_session == root)
                .unwrap_or(TreeUsage {
                    root_session: root.clone(),
                    threads: 0,
                    usage: Usage::default(),
                    session: Usage::default(),
                });
            let rows = tree_rows(
                &conn,
                &SessionId::new(root.as_str()),
                Some(&key),
                &placements,
            )?;
            selected.push((total, Some(t.id.into_string()), rows));
        }
        None => {
            for total in all {
                if session
                    .as_ref()
                    .is_some_and(|s| s.root_session != total.root_session)
                {
                    continue;
                }
                let rows = tree_rows(
                    &conn,
                    &SessionId::new(total.root_session.as_str()),
                    None,
                    &placements,
                )?;
                selected.push((total, None, rows));
            }
        }
    }
    for (_, _, rows) in selected.iter_mut() {
        for r in rows.iter_mut() {
            r.cap = CapDoc::nearest(&thread_caps, &r.usage);
        }
    }
    if json {
        let docs: Vec<TreeDoc<'_>> = selected
            .iter()
            .map(|(total, thread, rows)| TreeDoc {
                total,
                budget: budget.is_set().then(|| BudgetDoc {
                    tokens: budget.tokens,
                    usd: budget.usd,
                    reached: budget.reached(total).map(|r| r.0),
                }),
                tree_budget: kept.tree.as_ref().map(|k| TreeBudgetDoc {
                    tokens: k.tokens,
                    usd: k.usd,
                    reached: Budget {
                        tokens: k.tokens,
                        usd: k.usd,
                        ..Budget::default()
                    }
                    .reached(total)
                    .is_some(),
                }),
                thread: thread.as_deref(),
                rows,
            })
            .collect();
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "trees": docs }))?
        )?;
        return Ok(());
    }
    if selected.is_empty() {
        writeln!(out, "(no threads)")?;
    }
    for (i, (total, thread, rows)) in selected.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        // Which session it is, for a person: its name and start (as tree's heading has them).
        let about = infos
            .iter()
            .find(|i| i.root_session == total.root_session)
            .map(|i| {
                let mut s = String::new();
                if let Some(name) = &i.name {
                    s.push_str(&format!(" · \"{name}\""));
                }
                if let Some(at) = &i.started_at {
                    s.push_str(&format!(" · started {}", super::forest::short_time(at)));
                }
                s
            })
            .unwrap_or_default();
        writeln!(
            out,
            "tree of session {}: {} thread{} · {}{about}",
            total.root_session,
            total.threads,
            if total.threads == 1 { "" } else { "s" },
            summary(&total.usage)
        )?;
        writeln!(
            out,
            "  session {} itself (its own turns, counted in the total): {}",
            total.root_session,
            summary(&total.session)
        )?;
        if budget.is_set() {
            writeln!(out, "  budget: {}", budget_text(&budget, total))?;
        }
        if let Some(k) = &kept.tree {
            // The database's tree cap (`threadbase budget`), which every serve applies.
            let db_budget = Budget {
                tokens: k.tokens,
                usd: k.usd,
                ..Budget::default()
            };
            writeln!(
                out,
                "  tree budget (threadbase budget): {}",
                crate::engine::budget::budget_text_of(&db_budget, total, None)
            )?;
        }
        if !thread_caps.is_empty() {
            let names: Vec<String> = thread_caps.iter().map(|c| c.name()).collect();
            writeln!(
                out,
                "  cap per thread: {} (the smallest of each kind applies; CAP shows the one each thread is nearest to)",
                names.join(" · ")
            )?;
        }
        if let Some(max) = budget.max_tree_threads {
            writeln!(
                out,
                "  threads started: {} of {}={}",
                thousands(total.threads),
                crate::engine::budget::MAX_TREE_THREADS_VAR,
                thousands(max)
            )?;
        }
        if let Some(id) = thread {
            writeln!(out, "  subtree of {id}:")?;
        }
        // A team database (more than this host) gets a HOST column.
        let team = placements.team();
        let header: Vec<String> = [
            "PATH",
            "STATE",
            "HOST",
            "TURNS",
            "TOOLS",
            "INPUT",
            "OUTPUT",
            "CACHE R/W",
            "COST",
            "SUBTREE",
            "SUB TOKENS",
            "SUB COST",
        ]
        .iter()
        .chain((!thread_caps.is_empty()).then_some(&"CAP"))
        .filter(|h| team || **h != "HOST")
        .map(|s| s.to_string())
        .collect();
        let base = rows.first().map_or(1, |r| r.level);
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let u = &r.usage;
                let mut row = vec![
                    format!(
                        "{}{}",
                        "  ".repeat((r.level - base).max(0) as usize),
                        r.path
                    ),
                    state_text(r),
                ];
                if team {
                    row.push(r.host.clone().unwrap_or_else(|| "-".into()));
                }
                row.extend([
                    thousands(u.turns),
                    thousands(u.tool_calls),
                    thousands(u.input_tokens),
                    thousands(u.output_tokens),
                    format!(
                        "{}/{}",
                        thousands(u.cache_read_tokens),
                        thousands(u.cache_write_tokens)
                    ),
                    usd(u.cost_usd),
                    thousands(r.subtree.threads),
                    thousands(r.subtree.usage.total_tokens()),
                    usd(r.subtree.usage.cost_usd),
                ]);
                if let Some(c) = &r.cap {
                    row.push(c.text.clone());
                }
                row
            })
            .collect();
        write_table(out, &header, &table)?;
    }
    Ok(())
}

fn state_text(r: &UsageRow) -> String {
    match (r.agent_state, r.contract) {
        _ if r.state.starts_with("live/host unreachable") => r.state.clone(),
        (Some(s), Contract::Agent) => s.to_string(),
        _ => r.state.clone(),
    }
}

/// A short token count for narrow columns: `950`, `12.3k`, `4.56M` ([`crate::text::compact_count`]).
pub use crate::text::compact_count as compact;

#[cfg(test)]
mod tests {
    use super::compact;

    #[test]
    fn compact_counts() {
        assert_eq!(compact(950), "950");
        assert_eq!(compact(12_345), "12.3k");
        assert_eq!(compact(4_560_000), "4.56M");
    }
}
