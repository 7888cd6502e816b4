//! The page's reads and actions, as `Serialize` structs.
//!
//! - `/api/trees`: every root session's tree, newest first, with its total and the number of
//!   its threads the filter keeps (unfiltered: `tree_usage`'s count, no scan);
//! - `/api/rows?root=R&offset=O&limit=N`: a page of one tree in tree order
//!   (`store::web::page`: an index range), each row with its subtree's totals;
//! - `/api/thread?id=I`: one thread's detail: the `poll` projection at tail detail, its
//!   retained events, the whole answer, the stderr tail, the session file and the command that
//!   resumes it, and the actions it allows now;
//! - `/api/usage`: each tree's total, its root session's own turns and the budget, as
//!   `threadbase usage` prints them;
//! - `/api/command?id=C`: how an action's command row stands;
//! - `POST /api/action`: `{"thread", "action", "message"?, "mode"?}`.
//!
//! The filters are query parameters: `state` (all, live, closed), `visibility` (all, active,
//! archived), `contract` (all, thread, agent, worker), `match` (a glob on the path when it holds
//! `*`, `?` or `[`, else a substring of it, ignoring case).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{json, query_param, Body, Web};
use crate::contract::projection::{self, Detail};
use crate::domain::{CommandKind, SessionId, ThreadId, ThreadStatus};
use crate::engine::budget::{thousands, usd, Budget};
use crate::error::{Error, ErrorCode, Result};
use crate::runtime::SendMode;
use crate::store::attention::Need;
use crate::store::events::StoredEvent;
use crate::store::hosts::Leases;
use crate::store::web::{self as rows, WebFilter, WebRow};
use crate::store::{commands, events, sessions, threads, usage, ThreadIds};
use crate::Store;

/// Rows a page holds at most.
pub const MAX_PAGE: i64 = 500;
/// The longest message a send takes (bytes).
pub const MAX_MESSAGE: usize = 64 * 1024;

/// Routes a read.
pub fn read(web: &Web, route: &str, q: Option<&str>) -> Result<hyper::Response<Body>> {
    let conn = web.store.read()?;
    if !usage::has_tables(&conn)? {
        return Err(usage::not_migrated());
    }
    match route {
        "/api/trees" => {
            let f = filter(q)?;
            let event = web.hub.event_id();
            let all = usage::trees(&conn)?;
            let roots: Vec<&str> = all.iter().map(|t| t.root_session.as_str()).collect();
            let infos = web.session_infos(&conn, &roots)?;
            Ok(json(&trees(&conn, all, &infos, &f, event)?))
        }
        "/api/rows" => {
            let root = SessionId::new(required(q, "root")?);
            let offset = number(q, "offset", 0, 0, i64::MAX)?;
            let limit = number(q, "limit", 200, 1, MAX_PAGE)?;
            Ok(json(&page(&conn, &root, &filter(q)?, offset, limit)?))
        }
        "/api/thread" => Ok(json(&detail(
            &conn,
            &web.store,
            &ThreadId::new(required(q, "id")?),
        )?)),
        "/api/timeline" => Ok(json(&timeline(
            &conn,
            &SessionId::new(required(q, "root")?),
        )?)),
        "/api/usage" => {
            let all = usage::trees(&conn)?;
            let roots: Vec<&str> = all.iter().map(|t| t.root_session.as_str()).collect();
            let infos = web.session_infos(&conn, &roots)?;
            Ok(json(&usage_doc(all, &infos)?))
        }
        "/api/command" => {
            let id = number(q, "id", -1, 0, i64::MAX)?;
            match rows::command(&conn, id)? {
                Some(c) => Ok(json(&CommandDoc::of(c))),
                None => Err(Error::new(
                    ErrorCode::UnknownReference,
                    format!("No command {id}. Repair: use the id an action answered with."),
                )),
            }
        }
        other => Err(Error::internal(format!(
            "No read for {other}. Repair: report a bug."
        ))),
    }
}

fn required(q: Option<&str>, name: &str) -> Result<String> {
    query_param(q, name)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            Error::invalid(format!(
                "The query parameter {name} is required. Repair: add ?{name}=… as the page does."
            ))
        })
}

fn number(q: Option<&str>, name: &str, default: i64, min: i64, max: i64) -> Result<i64> {
    let Some(text) = query_param(q, name) else {
        if default >= min {
            return Ok(default);
        }
        return required(q, name).map(|_| default);
    };
    match text.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(Error::invalid(format!(
            "{name}={text:?} is not a whole number from {min} to {max}. Repair: pass one."
        ))),
    }
}

/// The filter the query names; a word outside a parameter's list is refused.
pub fn filter(q: Option<&str>) -> Result<WebFilter> {
    fn word(q: Option<&str>, name: &str, words: &[&'static str]) -> Result<&'static str> {
        match query_param(q, name).filter(|v| !v.is_empty()) {
            None => Ok("all"),
            Some(v) => words.iter().find(|w| **w == v).copied().ok_or_else(|| {
                Error::invalid(format!(
                    "{name}={v:?} is not one of {}. Repair: pick one of them.",
                    words.join(", ")
                ))
            }),
        }
    }
    let state = word(q, "state", &["all", "live", "closed"])?;
    let visibility = word(q, "visibility", &["all", "active", "archived"])?;
    let contract = word(q, "contract", &["all", "thread", "agent", "worker"])?;
    let pattern = query_param(q, "match").filter(|m| !m.trim().is_empty());
    let (glob, text) = match pattern {
        Some(p) if p.contains(['*', '?', '[']) => (Some(p), None),
        Some(p) => (None, Some(p)),
        None => (None, None),
    };
    let host = query_param(q, "host").filter(|h| !h.trim().is_empty());
    Ok(WebFilter {
        state,
        visibility,
        contract,
        glob,
        text,
        host,
    })
}

/// Tokens and cost.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    pub tokens: i64,
    pub cost_usd: f64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreesDoc {
    /// The change event this answer is as new as (or newer than).
    pub event: String,
    pub filtered: bool,
    pub trees: Vec<TreeDoc>,
    /// Issue 50: every thread that needs the person (the view `thread_attention`), oldest
    /// first, whatever the filter: the page's band and its title's count.
    pub needs: Vec<rows::NeedRow>,
    /// Issue 50: the hosts whose serves used this database (`host_serves`), for the page's
    /// host filter, shown when there is more than one.
    pub hosts: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeDoc {
    pub root_session: String,
    pub name: Option<String>,
    pub cwd: Option<String>,
    pub started_at: Option<String>,
    /// Threads of the tree the filter keeps: the rows the page pages through.
    pub rows: i64,
    /// Every thread of the tree, and what they spent with the root session's own turns.
    pub threads: i64,
    pub total: Spend,
}

/// Every tree (`all`, with their sessions' `infos`), newest session first; under a filter, only
/// trees with a match.
pub fn trees(
    conn: &crate::store::Conn,
    mut all: Vec<usage::TreeUsage>,
    infos: &[sessions::SessionInfo],
    f: &WebFilter,
    event: String,
) -> Result<TreesDoc> {
    all.sort_by_key(|t| {
        infos
            .iter()
            .position(|i| i.root_session == t.root_session)
            .unwrap_or(usize::MAX)
    });
    let counts = (!f.is_none())
        .then(|| rows::filtered_counts(conn, f))
        .transpose()?;
    let trees = all
        .into_iter()
        .filter_map(|t| {
            let shown = match &counts {
                None => t.threads,
                Some(c) => *c.get(&t.root_session)?,
            };
            let info = infos.iter().find(|i| i.root_session == t.root_session);
            // `usage` holds the root session's own turns already (`usage::trees`), as
            // `threadbase usage`'s total does.
            let total = t.usage;
            Some(TreeDoc {
                name: info.and_then(|i| i.name.clone()),
                cwd: info.and_then(|i| i.cwd.clone()),
                started_at: info.and_then(|i| i.started_at.clone()),
                rows: shown,
                threads: t.threads,
                total: Spend {
                    tokens: total.total_tokens(),
                    cost_usd: total.cost_usd,
                },
                root_session: t.root_session,
            })
        })
        .filter(|t| t.rows > 0)
        .collect();
    Ok(TreesDoc {
        event,
        filtered: !f.is_none(),
        trees,
        needs: rows::needs(conn)?,
        hosts: crate::store::hosts::list(conn)?
            .into_iter()
            .map(|h| h.host_id)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PageDoc {
    pub root_session: String,
    pub offset: i64,
    pub rows: Vec<RowDoc>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RowDoc {
    pub id: String,
    pub level: i64,
    pub path: String,
    pub name: String,
    pub task_name: String,
    /// Issue 50: what it was asked to do, in one line (its name, else its prompt's first line).
    pub task: String,
    pub contract: crate::domain::Contract,
    pub manager_session: String,
    /// The state in words, as `tree` and `top` show it (`live/busy`, `closed/stopped`, …).
    pub state: String,
    /// Issue 45: what needs the user (`{attention, since, detail}`), absent when nothing does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention: Option<Need>,
    /// Issue 33: the host that holds (or held) it, on a database more than one host uses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub status: ThreadStatus,
    pub phase: crate::domain::Phase,
    pub exit_kind: Option<crate::domain::ExitKind>,
    pub archived: bool,
    pub created_at: String,
    pub last_event_at: String,
    #[serde(flatten)]
    pub spend: Spend,
    pub subtree: SubtreeDoc,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubtreeDoc {
    pub threads: i64,
    pub tokens: i64,
    pub cost_usd: f64,
}

/// Whether the serve a row of this host records runs (its pid looked up here): only for rows
/// held here ([`Leases::here`]); a row of another host is judged by its host's lease ([`Reach`]).
fn owner_alive(pid: Option<i64>, started_at: Option<i64>) -> bool {
    crate::identity::Owner::recorded(pid, started_at, None, None).is_some_and(|o| o.is_alive())
}

/// What needs the user about a row (issue 45): the view `thread_attention`'s word, seen from
/// this host, as `tree` sees it ([`crate::store::attention::seen_here`]).
fn need_of(r: &WebRow, leases: &Leases, need: Option<Need>) -> Option<Need> {
    let live = r.status == ThreadStatus::Live;
    let here = leases.here(r.host_id.as_deref(), live);
    let owner_gone = here
        && live
        && r.owner_started_at.is_some()
        && !owner_alive(r.owner_pid, r.owner_started_at);
    crate::store::attention::seen_here(need, owner_gone, r.owner_pid, Some(&r.last_event_at))
}

/// The state in words, as `tree` shows it: a live thread of a host whose lease ran out
/// (issue 33) reads `live/host unreachable since T`, one that needs the user `live/<word>`.
fn state_of(r: &WebRow, leases: &Leases, need: Option<&Need>) -> String {
    let live = r.status == ThreadStatus::Live;
    let unreachable = leases.unreachable_since(r.host_id.as_deref(), live);
    let mut s = match (r.contract, r.agent_state, unreachable) {
        (_, _, Some(since)) if live => format!(
            "live/host unreachable since {}",
            crate::store::sessions::short_time(since)
        ),
        _ if live && need.is_some() => format!("live/{}", need.map_or("", Need::word)),
        (crate::domain::Contract::Agent, Some(a), _) => a.to_string(),
        _ => crate::domain::state_words(
            r.status,
            r.phase,
            r.exit_kind,
            r.exit_code,
            r.signalled,
            need.map(|n| n.attention),
        ),
    };
    if r.archived || r.hidden {
        s.push_str(" archived");
    }
    s
}

/// A page of `root`'s tree with each row's subtree totals: two statements.
pub fn page(
    conn: &crate::store::Conn,
    root: &SessionId,
    f: &WebFilter,
    offset: i64,
    limit: i64,
) -> Result<PageDoc> {
    let found = rows::page(conn, root, f, offset, limit)?;
    let ids: Vec<ThreadId> = found.iter().map(|r| r.id.clone()).collect();
    let totals = rows::subtree_totals(conn, &ids)?;
    let leases = Leases::read(conn)?;
    let needs = match crate::store::attention::has_view(conn)? {
        true => crate::store::attention::of_threads(conn, &ThreadIds::new(&ids)?)?,
        false => vec![None; ids.len()],
    };
    // A team database (more than this host): each row names its host.
    let team = leases.others()
        || found
            .iter()
            .any(|r| r.host_id.as_deref().is_some_and(|h| leases.is_other(h)));
    let rows = found
        .iter()
        .zip(needs)
        .map(|(r, need)| {
            let sub = totals.get(&r.id).copied().unwrap_or_default();
            let need = need_of(r, &leases, need);
            RowDoc {
                id: r.id.to_string(),
                level: r.level,
                path: r.path.clone(),
                name: r.name.clone(),
                task_name: r.task_name.clone(),
                task: rows::task_line(&r.name, &r.task_name, r.prompt_head.as_deref()),
                contract: r.contract,
                manager_session: r.manager_session.clone(),
                state: state_of(r, &leases, need.as_ref()),
                attention: need,
                host: r.host_id.clone().filter(|_| team),
                status: r.status,
                phase: r.phase,
                exit_kind: r.exit_kind,
                archived: r.archived || r.hidden,
                created_at: r.created_at.clone(),
                last_event_at: r.last_event_at.clone(),
                spend: Spend {
                    tokens: r.tokens,
                    cost_usd: r.cost_usd,
                },
                subtree: SubtreeDoc {
                    threads: sub.threads,
                    tokens: sub.tokens,
                    cost_usd: sub.cost_usd,
                },
            }
        })
        .collect();
    Ok(PageDoc {
        root_session: root.to_string(),
        offset,
        rows,
    })
}

/// An action the page offers for a thread, and whether it may be taken now.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionDoc {
    pub action: ActionKind,
    pub enabled: bool,
    /// Why not, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The actions, in the order the page shows them. A new one is a variant here, a case in
/// [`allowed`] and in [`action`], and an entry in the page's `ACTIONS` table (assets/app.js).
/// `Answer` (a child's pending question, `THREADBASE_UI=parent`) is offered by the question's
/// own block of the detail, not among the buttons ([`ActionKind::BUTTONS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Stop,
    ForceStop,
    Send,
    Archive,
    Unarchive,
    Answer,
    /// Issue 48: bring an isolated thread's worktree into the main tree (offered only for a
    /// thread with a worktree; a `commands` row the serve holding or managing it carries out).
    Merge,
}

impl ActionKind {
    pub const BUTTONS: [ActionKind; 6] = [
        ActionKind::Stop,
        ActionKind::ForceStop,
        ActionKind::Send,
        ActionKind::Archive,
        ActionKind::Unarchive,
        ActionKind::Merge,
    ];
}

/// Whether the serve holding a live thread can take a command row from the page (issue 46):
/// a row of this host is judged by its serve's pid here, a row of another host by that host's
/// lease (`host_serves`), never by a pid of this host (it names another process here, or none).
#[derive(Debug, Clone, PartialEq)]
pub enum Reach {
    /// Its serve takes commands: a serve of this host that runs, or one of a host whose lease
    /// holds (or that left no lease to judge by, as `top` and the engine take it).
    Holder,
    /// The serve of this host (or of this host's earlier boot) that held it is gone.
    Gone,
    /// Its host's lease ran out: a command would wait for nobody, so it is refused at once.
    Unreachable(crate::store::hosts::Lease),
}

impl Reach {
    /// Where thread `id`'s serve is, as [`Reach`] says.
    pub fn of(conn: &crate::store::Conn, id: &ThreadId) -> Result<Reach> {
        let Some((_, held)) = threads::thread_holder(conn, id)? else {
            return Ok(Reach::Gone);
        };
        Ok(match held {
            Some(o) if o.other_host.is_some() => {
                match crate::store::hosts::lease_of_thread(conn, id)? {
                    Some(lease) if !lease.up => Reach::Unreachable(lease),
                    _ => Reach::Holder,
                }
            }
            Some(o) if o.is_alive() => Reach::Holder,
            _ => Reach::Gone,
        })
    }
}

/// What a thread allows: `None` when it may, else why not (with what to do). `reach` is where
/// its serve is ([`Reach::of`]).
fn allowed(
    kind: ActionKind,
    row: &threads::ThreadRow,
    contract: &str,
    reach: &Reach,
) -> std::result::Result<(), String> {
    let live = row.status() == ThreadStatus::Live;
    match kind {
        ActionKind::Merge => {
            if live
                && matches!(
                    row.phase(),
                    crate::domain::Phase::Busy
                        | crate::domain::Phase::Starting
                        | crate::domain::Phase::Stopping
                )
            {
                return Err(format!(
                    "{} is live and {} (it may be writing its files now). Repair: wait for it to go idle, or stop it, then merge.",
                    row.path,
                    row.phase()
                ));
            }
            Ok(())
        }
        ActionKind::Answer => {
            if !live {
                return Err(format!(
                    "{} is closed; its questions ended with it. Repair: nothing to answer.",
                    row.path
                ));
            }
            Ok(())
        }
        ActionKind::Stop | ActionKind::ForceStop | ActionKind::Send => {
            if kind == ActionKind::Send && contract != "thread" {
                return Err(format!(
                    "Only a `thread` tool thread takes a message here ({contract} threads are steered by their own tools). Repair: send from the session that started it."
                ));
            }
            if !live {
                return Err(format!(
                    "{} is closed. Repair: resume it from its session, or start a new thread.",
                    row.path
                ));
            }
            match reach {
                Reach::Holder => Ok(()),
                Reach::Gone => Err(format!(
                    "The serve that held {} is gone. Repair: run `threadbase restore` (any running serve does it within a second).",
                    row.path
                )),
                Reach::Unreachable(lease) => {
                    let word = if kind == ActionKind::Send {
                        "send"
                    } else {
                        "stop"
                    };
                    Err(crate::store::hosts::unreachable(&row.path, word, lease).message)
                }
            }
        }
        ActionKind::Archive | ActionKind::Unarchive => {
            if contract != "thread" {
                return Err(format!(
                    "Only a `thread` tool thread is archived here ({contract} threads have their own). Repair: use that contract's tools."
                ));
            }
            if live {
                return Err(format!(
                    "{} is live. Repair: stop it or wait for it to close, then archive it.",
                    row.path
                ));
            }
            if (kind == ActionKind::Archive) == row.archived {
                return Err(format!(
                    "{} is {} already. Repair: nothing to do.",
                    row.path,
                    if row.archived {
                        "archived"
                    } else {
                        "not archived"
                    }
                ));
            }
            Ok(())
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailDoc {
    pub id: String,
    pub path: String,
    pub contract: String,
    pub manager_session: String,
    /// The `poll` projection at tail detail (contract A's snapshot of any thread).
    pub snapshot: Value,
    /// Every retained event, oldest first.
    pub events: Vec<StoredEvent>,
    /// The last assistant message, whole, with its line breaks.
    pub answer: Option<String>,
    pub stderr_tail: String,
    pub session_file: Option<String>,
    pub cwd: String,
    /// A shell command that continues the thread's Pi session.
    pub resume_command: Option<String>,
    pub usage: Option<String>,
    pub subtree: Option<String>,
    pub actions: Vec<ActionDoc>,
    /// The child's question waiting for an answer (`THREADBASE_UI=parent`), if any.
    pub question: Option<crate::store::questions::Question>,
    /// Issue 50: the whole prompt it was started with, when and by whom.
    pub prompt: Option<String>,
    pub prompt_at: String,
    pub prompt_by: String,
    /// Every message sent into it since, oldest first, with who sent it and when.
    pub sent: Vec<rows::Sent>,
    /// Issue 46: the host that holds (or held) it, on a database more than one host uses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Issue 46: live on a host whose lease ran out: since when (its last heartbeat); its
    /// stop and send are refused, saying so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_unreachable_since: Option<String>,
    /// Issue 48: its git worktree, when it runs in one (`THREADBASE_ISOLATION=worktree`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeDoc>,
}

/// An isolated thread's worktree in its detail: where, which branch from which commit, and
/// what it changed since (`threadbase diff`), cut at [`MAX_DIFF`] bytes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeDoc {
    pub path: String,
    pub branch: String,
    pub base_commit: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed_at: Option<String>,
    /// The diff, or why there is none here (removed, on another host).
    pub diff: String,
    pub diff_cut: bool,
}

/// The most of a worktree's diff the detail carries.
pub const MAX_DIFF: usize = 200_000;

/// Thread `id`'s worktree, with its diff read by git on this host.
fn worktree_doc(
    conn: &crate::store::Conn,
    store: &Store,
    id: &ThreadId,
) -> Result<Option<WorktreeDoc>> {
    let Some(tree) = crate::store::worktrees::of_thread_checked(conn, id)? else {
        return Ok(None);
    };
    let mut diff = match crate::engine::review::diff(store, id.as_str(), false) {
        Ok(d) if d.trim().is_empty() => "(no changes since its base commit)".to_string(),
        Ok(d) => d,
        Err(e) => e.message,
    };
    let diff_cut = diff.len() > MAX_DIFF;
    if diff_cut {
        let mut at = MAX_DIFF;
        while !diff.is_char_boundary(at) {
            at -= 1;
        }
        diff.truncate(at);
    }
    Ok(Some(WorktreeDoc {
        path: tree.path,
        branch: tree.branch,
        base_commit: tree.base_commit,
        removed_at: tree.removed_at,
        diff,
        diff_cut,
    }))
}

/// Quotes `s` for a POSIX shell when it needs it.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:=@,".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// One thread's detail.
pub fn detail(conn: &crate::store::Conn, store: &Store, id: &ThreadId) -> Result<DetailDoc> {
    let Some(row) = threads::thread_by_id_any(conn, id)? else {
        return Err(Error::new(
            ErrorCode::UnknownReference,
            format!("Unknown thread: {id}. Repair: pick a thread from the tree."),
        ));
    };
    let (manager_session, contract) = threads::manager_of_thread(conn, id)?.unwrap_or_default();
    let out = crate::store::output::of_thread(conn, id)?;
    let evs = events::rows_of_thread(conn, id)?;
    // Issue 45: what needs the user, as `show` sees it from this host.
    let placements = crate::store::hosts::Placements::read_one(conn, id)?;
    let need = placements.need_of(&(&row).into());
    let reach = match row.is_live() {
        true => Reach::of(conn, id)?,
        false => Reach::Gone,
    };
    let snapshot = projection::snapshot(&row, &out, &evs, Detail::Tail, need);
    let usage_line = usage::of_thread(conn, id)?.map(|u| crate::engine::budget::summary(&u));
    let subtree = usage::of_subtree(conn, id)?.map(|s| {
        format!(
            "{} thread{} · {} tokens · {}",
            thousands(s.threads),
            if s.threads == 1 { "" } else { "s" },
            thousands(s.usage.total_tokens()),
            usd(s.usage.cost_usd)
        )
    });
    let resume_command = row.session_file.as_ref().map(|f| {
        format!(
            "cd {} && pi --session {}",
            shell_quote(&row.cwd),
            shell_quote(f)
        )
    });
    let worktree = worktree_doc(conn, store, id)?;
    let actions = ActionKind::BUTTONS
        .iter()
        .filter(|k| match k {
            // One of the two is offered: the one that changes something.
            ActionKind::Archive => !row.archived,
            ActionKind::Unarchive => row.archived,
            ActionKind::Merge => worktree.as_ref().is_some_and(|w| w.removed_at.is_none()),
            _ => true,
        })
        .map(|&k| {
            let why = allowed(k, &row, &contract, &reach).err();
            ActionDoc {
                action: k,
                enabled: why.is_none(),
                why,
            }
        })
        .collect();
    let prompt_by = format!("session {manager_session} ({contract} tool)");
    Ok(DetailDoc {
        host: placements
            .host_of(id.as_str())
            .filter(|_| placements.team())
            .map(str::to_string),
        host_unreachable_since: match &reach {
            Reach::Unreachable(lease) => Some(lease.last_heartbeat.clone()),
            _ => None,
        },
        worktree,
        id: row.id.to_string(),
        path: row.path.clone(),
        contract,
        manager_session: manager_session.into_string(),
        snapshot,
        events: evs.into_iter().map(|e| e.stored()).collect(),
        answer: out.last_assistant_text.clone(),
        stderr_tail: String::from_utf8_lossy(&out.stderr_tail).into_owned(),
        session_file: row.session_file.clone(),
        cwd: row.cwd.clone(),
        resume_command,
        usage: usage_line,
        subtree,
        actions,
        question: crate::store::questions::pending_of(conn, id)?,
        prompt: rows::prompt_of(conn, id)?,
        prompt_at: row.created_at.clone(),
        prompt_by,
        sent: rows::sent_of(conn, id)?,
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageDoc {
    /// What `threadbase usage` prints above each tree's table: the tree's total, its root
    /// session's own turns, and the budget when one is set.
    pub lines: Vec<String>,
}

fn usage_doc(mut all: Vec<usage::TreeUsage>, infos: &[sessions::SessionInfo]) -> Result<UsageDoc> {
    let budget = Budget::from_env(&|k| std::env::var(k).ok())?;
    all.sort_by_key(|t| {
        infos
            .iter()
            .position(|i| i.root_session == t.root_session)
            .unwrap_or(usize::MAX)
    });
    let mut lines = Vec::new();
    for t in &all {
        lines.push(format!(
            "tree of session {}: {} thread{} · {}",
            t.root_session,
            t.threads,
            if t.threads == 1 { "" } else { "s" },
            crate::engine::budget::summary(&t.usage)
        ));
        lines.push(format!(
            "  session {} itself (its own turns, counted in the total): {}",
            t.root_session,
            crate::engine::budget::summary(&t.session)
        ));
        if budget.is_set() {
            lines.push(format!(
                "  budget: {}",
                crate::engine::budget::budget_text(&budget, t)
            ));
        }
    }
    if all.is_empty() {
        lines.push("(no threads)".to_string());
    }
    Ok(UsageDoc { lines })
}

mod action;
pub use action::*;
mod timeline;
pub use timeline::*;

#[cfg(test)]
mod tests;
