//! `threadbase list|tree|show|events`: read-only views of what the store holds.

use super::select::{selected_session, Within};
use std::io::Write;
use std::path::Path;

use crate::store::Conn;
use serde_json::{json, Value};

use super::forest::{self, Node};
use super::sql::write_table;
use super::stop::{optional_globs, path_globs};
use crate::domain::{ExitKind, ThreadId};
use crate::engine::budget::{thousands, usd};
use crate::error::Result;
use crate::store::events;
use crate::store::hosts::Placements;
use crate::store::list::{list_every_manager, StateFilter, VisibilityFilter};
use crate::store::open_read_only;
use crate::store::threads::{manager_of_thread, ThreadRow};

pub fn list(
    db: &Path,
    filters: &TreeFilters<'_>,
    state: &str,
    visibility: &str,
    out: &mut dyn Write,
) -> Result<()> {
    let conn = open_read_only(db)?;
    let listing = list_every_manager(
        &conn,
        StateFilter::parse(state)?,
        VisibilityFilter::parse(visibility)?,
    )?;
    let trees = filtered_trees(&conn, listing, filters)?;
    let placements = Placements::read(&conn)?;
    let nodes: Vec<&Node> = trees.iter().flat_map(|t| &t.nodes).collect();
    let live = nodes.iter().filter(|n| n.row.is_live()).count();
    if filters.json {
        let placements = &placements;
        let threads: Vec<Value> = trees
            .iter()
            .flat_map(|t| {
                t.nodes
                    .iter()
                    .map(move |n| node_json(t, n, None, placements))
            })
            .collect::<Result<_>>()?;
        let doc = json!({
            "threads": threads,
            "count": nodes.len(),
            "liveCount": live,
            "closedCount": nodes.len() - live,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    // A team database (more than this host) gets a HOST column.
    let team = placements.team();
    let header: Vec<String> = ["PATH", "ID", "STATE", "HOST", "NAME", "MANAGER"]
        .iter()
        .filter(|h| team || **h != "HOST")
        .map(|s| s.to_string())
        .collect();
    for tree in &trees {
        writeln!(out, "{}", forest::heading(tree))?;
        let rows: Vec<Vec<String>> = tree
            .nodes
            .iter()
            .map(|n| {
                let mut row = vec![
                    format!("{}{}", "  ".repeat(n.level - 1), n.row.path),
                    n.row.id.to_string(),
                    forest::state_label(&n.row, &placements),
                ];
                if team {
                    row.push(forest::host_cell(&placements, &n.row));
                }
                row.push(n.row.name.clone());
                row.push(format!("{} ({})", n.manager_session, n.contract));
                row
            })
            .collect();
        write_table(out, &header, &rows)?;
    }
    writeln!(
        out,
        "{} thread{} ({} live, {} closed)",
        nodes.len(),
        if nodes.len() == 1 { "" } else { "s" },
        live,
        nodes.len() - live
    )?;
    Ok(())
}

/// What narrows `list` and `tree`: `--match GLOB`, `--session ID|NAME|latest` (`--latest`
/// is `--session latest`), `--json`.
pub struct TreeFilters<'a> {
    pub matching: Option<&'a str>,
    pub session: Option<&'a str>,
    pub json: bool,
}

/// The trees of the listed threads, newest session first, narrowed by `--match` and
/// `--session`.
fn filtered_trees(
    conn: &Conn,
    mut listing: crate::store::list::Listing,
    filters: &TreeFilters<'_>,
) -> Result<Vec<forest::Tree>> {
    let session = selected_session(conn, filters.session)?;
    if let Some(g) = optional_globs(filters.matching)? {
        narrow(&mut listing, &g);
    }
    Ok(forest::only(
        forest::trees(conn, listing)?,
        session.as_ref(),
    ))
}

/// A thread in its tree as JSON: the row, its host, its tree's root, level and manager, and
/// (when given) its usage.
fn node_json(
    tree: &forest::Tree,
    n: &Node,
    usage: Option<crate::store::usage::Usage>,
    placements: &Placements,
) -> Result<Value> {
    let mut v = serde_json::to_value(&n.row)?;
    if let Value::Object(m) = &mut v {
        // Issue 33: the host that holds (or held) it, when recorded, and for a live thread of
        // a host whose lease ran out, since when.
        if let Some(host) = placements.host_of(n.row.id.as_str()) {
            m.insert("host".into(), Value::from(host));
        }
        if let Some(since) = placements.unreachable_since(n.row.id.as_str(), n.row.is_live()) {
            m.insert("hostUnreachableSince".into(), Value::from(since));
        }
        // Issue 45: what needs the user, as every surface says it, and the state in words.
        m.insert(
            "state".into(),
            Value::from(forest::state_label(&n.row, placements)),
        );
        if let Some(need) = placements.need_of(&(&n.row).into()) {
            m.insert("attention".into(), serde_json::to_value(need)?);
        }
        m.insert(
            "manager_session".into(),
            Value::from(n.manager_session.as_str()),
        );
        m.insert("contract".into(), Value::from(n.contract.as_str()));
        m.insert(
            "root_session".into(),
            Value::from(tree.info.root_session.as_str()),
        );
        m.insert("level".into(), Value::from(n.level));
        if let Some(u) = usage {
            m.insert("usage".into(), serde_json::to_value(u)?);
        }
    }
    Ok(v)
}

/// Keeps the threads whose path matches `globs`, with the counts recomputed.
fn narrow(listing: &mut crate::store::list::Listing, globs: &globset::GlobSet) {
    listing.threads.retain(|t| globs.is_match(&t.path));
    listing.count = listing.threads.len();
    listing.live_count = listing.threads.iter().filter(|t| t.is_live()).count();
    listing.closed_count = listing.count - listing.live_count;
}

pub fn tree(db: &Path, filters: &TreeFilters<'_>, out: &mut dyn Write) -> Result<()> {
    let conn = open_read_only(db)?;
    let listing = list_every_manager(&conn, StateFilter::All, VisibilityFilter::All)?;
    let trees = filtered_trees(&conn, listing, filters)?;
    let spent = crate::store::usage::all_if_any(&conn)?;
    let placements = Placements::read(&conn)?;
    let team = placements.team();
    let usage_of = |id: &str| spent.get(id).copied().unwrap_or_default();
    // Issue 48: the isolated threads' branches (the marker `⎇ <branch>`).
    let branches: std::collections::HashMap<String, String> = crate::store::worktrees::all(&conn)?
        .into_iter()
        .map(|l| {
            let removed = if l.worktree.removed_at.is_some() {
                ", removed"
            } else {
                ""
            };
            (
                l.worktree.thread_id.to_string(),
                format!("{}{removed}", l.worktree.branch),
            )
        })
        .collect();
    if filters.json {
        let mut docs = Vec::new();
        for tree in &trees {
            let items: Vec<Value> = tree
                .nodes
                .iter()
                .map(|n| node_json(tree, n, Some(usage_of(n.row.id.as_str())), &placements))
                .collect::<Result<_>>()?;
            let mut doc = serde_json::to_value(&tree.info)?;
            doc["threads"] = Value::Array(items);
            docs.push(doc);
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&docs)?)?;
        return Ok(());
    }
    if trees.is_empty() {
        writeln!(out, "(no threads)")?;
    }
    for tree in &trees {
        writeln!(out, "{}", forest::heading(tree))?;
        // Whose session each child manager is: that thread's own serve started its threads.
        let host_of: std::collections::HashMap<&str, &str> = tree
            .nodes
            .iter()
            .filter_map(|n| Some((n.row.session_id.as_deref()?, n.row.path.as_str())))
            .collect();
        for n in &tree.nodes {
            let t = &n.row;
            let indent = "  ".repeat(n.level);
            let label = crate::paths::basename(&t.path);
            let u = usage_of(t.id.as_str());
            // Threads a child's own serve manages say so: that serve holds their processes.
            let held = match host_of.get(n.manager_session.as_str()) {
                _ if n.manager_session == tree.info.root_session => String::new(),
                Some(host) => format!("  (started by {host}'s own serve)"),
                None => format!("  (manager {})", n.manager_session),
            };
            // A team database (more than this host): the host that holds (or held) it.
            let mut on = match placements.host_of(t.id.as_str()) {
                Some(host) if team => format!("  host {host}"),
                _ => String::new(),
            };
            if let Some(branch) = branches.get(t.id.as_str()) {
                on.push_str(&format!("  \u{2387} {branch}"));
            }
            writeln!(
                out,
                "{indent}{label}  {}  [{}]{on}  {}  · {} tokens · {}{held}",
                t.path,
                forest::state_label(t, &placements),
                t.name,
                thousands(u.total_tokens()),
                usd(u.cost_usd)
            )?;
        }
    }
    Ok(())
}

pub fn show(
    db: &Path,
    reference: &str,
    within: Within<'_>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let conn = open_read_only(db)?;
    let t = within.resolve(&conn, reference)?;
    let mut doc = thread_json(&conn, &t)?;
    let (own, subtree) = if crate::store::usage::has_tables(&conn)? {
        (
            crate::store::usage::of_thread(&conn, &t.id)?,
            crate::store::usage::of_subtree(&conn, &t.id)?,
        )
    } else {
        (None, None)
    };
    doc["usage"] = serde_json::to_value(own)?;
    doc["subtreeUsage"] = serde_json::to_value(subtree)?;
    let placements = Placements::read_one(&conn, &t.id)?;
    if let Some(host) = placements.host_of(t.id.as_str()) {
        doc["host"] = Value::from(host);
    }
    if let Some(since) = placements.unreachable_since(t.id.as_str(), t.is_live()) {
        doc["hostUnreachableSince"] = Value::from(since);
    }
    // Issue 45: what needs the user, as every surface says it, and the state in words.
    let need = placements.need_of(&(&t).into());
    doc["state"] = Value::from(forest::state_label(&t, &placements));
    if let Some(need) = &need {
        doc["attention"] = serde_json::to_value(need)?;
    }
    // Issue 48: an isolated thread's worktree, and what it changed (git asked now).
    let worktree = crate::store::worktrees::of_thread_checked(&conn, &t.id)?;
    let stat = worktree.as_ref().and_then(|w| {
        let present = w.removed_at.is_none() && Path::new(&w.path).is_dir();
        present
            .then(|| crate::worktree::stat(Path::new(&w.path), &w.base_commit).ok())
            .flatten()
    });
    if let Some(w) = &worktree {
        let mut v = serde_json::to_value(w)?;
        if let Some(st) = stat {
            v["filesChanged"] = Value::from(st.files);
            v["insertions"] = Value::from(st.insertions);
            v["deletions"] = Value::from(st.deletions);
        }
        doc["worktree"] = v;
    }
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    let (session, contract) = manager_of_thread(&conn, &t.id)?.unwrap_or_default();
    let mut kv = vec![
        ("id", t.id.to_string()),
        ("path", t.path.clone()),
        ("name", t.name.clone()),
        ("taskName", t.task_name.clone()),
        ("session", session_text(&conn, &t.id)?),
        ("manager", format!("{session} ({contract})")),
        ("status", status_text(&t)),
        ("phase", t.phase().to_string()),
        ("state", forest::state_label(&t, &placements)),
        ("depth", t.depth.to_string()),
        ("cwd", t.cwd.clone()),
        ("args", serde_json::to_string(&t.args)?),
        ("archived", t.archived.to_string()),
        ("createdAt", t.created_at.clone()),
        ("lastEventAt", t.last_event_at.clone()),
    ];
    if let Some(s) = t.agent_state {
        kv.push(("state", s.to_string()));
    }
    // Issue 33: the host that holds (or held) it, and whether its lease ran out.
    if let Some(host) = placements.host_of(t.id.as_str()) {
        kv.push((
            "host",
            match placements.unreachable_since(t.id.as_str(), t.is_live()) {
                Some(since) => format!(
                    "{host}, unreachable since {since} (Repair: wait until it is back, or `threadbase host forget {host}` closes its threads as stale)"
                ),
                None => host.to_string(),
            },
        ));
    }
    if let Some(need) = &need {
        kv.push(("needs you", need_text(need)));
    }
    if let Some(w) = &worktree {
        let what = match (&w.removed_at, stat) {
            (Some(at), _) => format!("removed {at}"),
            (None, Some(st)) => crate::contract::format::stat_text(&st),
            (None, None) => "folder missing (Repair: threadbase check)".to_string(),
        };
        kv.push((
            "worktree",
            format!(
                "{} (branch {}, base {}): {what}",
                w.path,
                w.branch,
                &w.base_commit[..w.base_commit.len().min(12)]
            ),
        ));
    }
    if let Some(k) = t.exit().map(|x| x.kind) {
        kv.push(("exit", exit_text(&t, k)));
    }
    if let Some(f) = &t.session_file {
        kv.push(("sessionFile", f.clone()));
    }
    if let Some(p) = t.pid {
        kv.push(("pid", p.to_string()));
    }
    if let Some(u) = own {
        kv.push(("usage", super::usage::summary(&u)));
    }
    if let Some(s) = subtree {
        kv.push((
            "subtree",
            format!(
                "{} thread{} · {}",
                s.threads,
                if s.threads == 1 { "" } else { "s" },
                super::usage::summary(&s.usage)
            ),
        ));
    }
    for (k, v) in kv {
        writeln!(out, "{k:<12} {v}")?;
    }
    let evs = events::of_thread(&conn, &t.id)?;
    writeln!(
        out,
        "events       {} retained (last seq {})",
        evs.len(),
        t.last_seq
    )?;
    for e in evs.iter().rev().take(5).rev() {
        writeln!(out, "  {:>5}  {}  {}  {}", e.seq, e.at, e.kind, e.data)?;
    }
    Ok(())
}

pub fn events(
    db: &Path,
    reference: &str,
    within: Within<'_>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let conn = open_read_only(db)?;
    let t = within.resolve(&conn, reference)?;
    let evs = events::of_thread(&conn, &t.id)?;
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&evs)?)?;
        return Ok(());
    }
    write_events(out, &t, &evs)
}

/// One thread's retained events as `events` prints them: a heading, then a line each.
fn write_events(out: &mut dyn Write, t: &ThreadRow, evs: &[events::StoredEvent]) -> Result<()> {
    writeln!(out, "{} ({}): {} events retained", t.path, t.id, evs.len())?;
    for e in evs {
        writeln!(out, "{:>5}  {}  {:<18} {}", e.seq, e.at, e.kind, e.data)?;
    }
    Ok(())
}

/// `events --match GLOB`: the retained events of every matching thread, in path order (with
/// `--session`: that session's, in tree order).
pub fn events_matching(
    db: &Path,
    matching: &str,
    within: Within<'_>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let globs = path_globs(&[matching.to_string()])?;
    let conn = open_read_only(db)?;
    let session = selected_session(&conn, within.session)?;
    let mut listing = list_every_manager(&conn, StateFilter::All, VisibilityFilter::All)?;
    narrow(&mut listing, &globs);
    if session.is_some() {
        let threads = std::mem::take(&mut listing.threads);
        let all = crate::store::list::Listing { threads, ..listing };
        let trees = forest::only(forest::trees(&conn, all)?, session.as_ref());
        listing.threads = trees
            .into_iter()
            .flat_map(|t| t.nodes.into_iter().map(|n| n.row))
            .collect();
    }
    if let Some(session) = within.manager {
        let ids: Vec<ThreadId> = listing.threads.iter().map(|t| t.id.clone()).collect();
        let of = crate::store::sessions::sessions_of_threads(&conn, &ids)?;
        listing
            .threads
            .retain(|t| of.get(&t.id).is_some_and(|(_, m)| m == session));
    }
    if json {
        let mut docs = Vec::new();
        for t in &listing.threads {
            let evs = events::of_thread(&conn, &t.id)?;
            docs.push(json!({"id": t.id, "path": t.path, "events": evs}));
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&docs)?)?;
        return Ok(());
    }
    if listing.threads.is_empty() {
        writeln!(out, "No thread matches {matching}.")?;
    }
    for t in &listing.threads {
        write_events(out, t, &events::of_thread(&conn, &t.id)?)?;
    }
    Ok(())
}

/// The Pi session a thread's tree belongs to, as `--session` names it: `"name" started … (id
/// …)`; `-` before V4.
fn session_text(conn: &Conn, id: &ThreadId) -> Result<String> {
    use crate::store::sessions;
    let Some(root) = sessions::root_of_thread(conn, id)? else {
        return Ok("-".to_string());
    };
    Ok(
        match sessions::infos(conn)?
            .iter()
            .find(|i| i.root_session == root)
        {
            Some(info) => sessions::label(info),
            None => format!("(id {root})"),
        },
    )
}

/// What needs the user, in one line: the word, why, and since when (`show`).
pub fn need_text(need: &crate::store::attention::Need) -> String {
    let mut s = need.attention.as_str().to_string();
    if let Some(d) = need.detail.as_deref().filter(|d| !d.is_empty()) {
        s.push_str(": ");
        s.push_str(d);
    }
    if let Some(since) = &need.since {
        s.push_str(&format!(" (since {since})"));
    }
    s
}

fn status_text(t: &ThreadRow) -> String {
    match &t.agent_state {
        Some(s) => format!("{} ({s})", t.status()),
        None => t.status().to_string(),
    }
}

fn exit_text(t: &ThreadRow, kind: ExitKind) -> String {
    let mut s = kind.to_string();
    if let Some(c) = t.exit().and_then(|x| x.code) {
        s.push_str(&format!(" code={c}"));
    }
    if let Some(sig) = t.exit().and_then(|x| x.signal.as_ref()) {
        s.push_str(&format!(" signal={sig}"));
    }
    if let Some(m) = t.exit().and_then(|x| x.message.as_ref()) {
        s.push_str(&format!(" ({m})"));
    }
    s
}

fn thread_json(conn: &Conn, t: &ThreadRow) -> Result<Value> {
    let (session, contract) = manager_of_thread(conn, &t.id)?.unwrap_or_default();
    let mut v = serde_json::to_value(t)?;
    if let Value::Object(m) = &mut v {
        m.insert("manager_session".into(), Value::from(session.into_string()));
        m.insert("contract".into(), Value::from(contract));
    }
    Ok(v)
}
