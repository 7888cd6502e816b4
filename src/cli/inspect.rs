//! `threadbase list|tree|show|events`: read-only views of what the store holds.

use std::io::Write;
use std::path::Path;

use rusqlite::Connection;
use serde_json::{json, Value};

use super::sql::write_table;
use super::stop::{optional_globs, path_globs};
use crate::engine::budget::{thousands, usd};
use crate::error::{Error, ErrorCode, Result};
use crate::list::{list_every_manager, StateFilter, VisibilityFilter};
use crate::paths::json_quote;
use crate::refs::{resolve, RefScope};
use crate::store::events;
use crate::store::open_read_only;
use crate::store::threads::{
    manager_id, manager_of_thread, query_threads, thread_by_id_any, Contract, ThreadRow,
};

const CANDIDATES: i64 = 20;

pub fn list(
    db: &Path,
    state: &str,
    visibility: &str,
    matching: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let globs = optional_globs(matching)?;
    let conn = open_read_only(db)?;
    let mut listing = list_every_manager(
        &conn,
        StateFilter::parse(state)?,
        VisibilityFilter::parse(visibility)?,
    )?;
    if let Some(g) = &globs {
        narrow(&mut listing, g);
    }
    if json {
        let threads: Vec<Value> = listing
            .threads
            .iter()
            .map(|t| thread_json(&conn, t))
            .collect::<Result<_>>()?;
        let doc = json!({
            "threads": threads,
            "count": listing.count,
            "liveCount": listing.live_count,
            "closedCount": listing.closed_count,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    let header: Vec<String> = ["PATH", "ID", "STATUS", "PHASE", "NAME", "MANAGER"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut rows = Vec::new();
    for t in &listing.threads {
        let (session, contract) = manager_of_thread(&conn, &t.id)?.unwrap_or_default();
        rows.push(vec![
            t.path.clone(),
            t.id.clone(),
            status_text(t),
            t.phase.clone(),
            t.name.clone(),
            format!("{session} ({contract})"),
        ]);
    }
    write_table(out, &header, &rows)?;
    writeln!(
        out,
        "{} thread{} ({} live, {} closed)",
        listing.count,
        if listing.count == 1 { "" } else { "s" },
        listing.live_count,
        listing.closed_count
    )?;
    Ok(())
}

/// Keeps the threads whose path matches `globs`, with the counts recomputed.
fn narrow(listing: &mut crate::list::Listing, globs: &globset::GlobSet) {
    listing.threads.retain(|t| globs.is_match(&t.path));
    listing.count = listing.threads.len();
    listing.live_count = listing
        .threads
        .iter()
        .filter(|t| t.status == "live")
        .count();
    listing.closed_count = listing.count - listing.live_count;
}

pub fn tree(db: &Path, matching: Option<&str>, json: bool, out: &mut dyn Write) -> Result<()> {
    let globs = optional_globs(matching)?;
    let conn = open_read_only(db)?;
    let mut listing = list_every_manager(&conn, StateFilter::All, VisibilityFilter::All)?;
    if let Some(g) = &globs {
        narrow(&mut listing, g);
    }
    // Group by manager, keeping path order inside each group.
    let mut groups: Vec<(i64, Vec<&ThreadRow>)> = Vec::new();
    for t in &listing.threads {
        match groups.iter_mut().find(|(m, _)| *m == t.manager_id) {
            Some((_, v)) => v.push(t),
            None => groups.push((t.manager_id, vec![t])),
        }
    }
    groups.sort_by_key(|(m, _)| *m);
    let spent = crate::store::usage::all_if_any(&conn)?;
    let usage_of = |id: &str| spent.get(id).copied().unwrap_or_default();
    if json {
        let mut docs = Vec::new();
        for (_, threads) in &groups {
            let (session, contract) = manager_of_thread(&conn, &threads[0].id)?.unwrap_or_default();
            let items: Vec<Value> = threads
                .iter()
                .map(|t| {
                    let mut v = thread_json(&conn, t)?;
                    v["usage"] = serde_json::to_value(usage_of(&t.id))?;
                    Ok(v)
                })
                .collect::<Result<_>>()?;
            docs.push(json!({"managerSession": session, "contract": contract, "threads": items}));
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&docs)?)?;
        return Ok(());
    }
    if groups.is_empty() {
        writeln!(out, "(no threads)")?;
    }
    for (_, threads) in &groups {
        let (session, contract) = manager_of_thread(&conn, &threads[0].id)?.unwrap_or_default();
        writeln!(out, "manager {session} ({contract})")?;
        for t in threads {
            // Indent by depth below the nearest listed ancestor chain.
            let depth = ancestors_listed(t, threads);
            let indent = "  ".repeat(depth + 1);
            let label = crate::paths::basename(&t.path);
            let archived = if t.archived { " archived" } else { "" };
            let u = usage_of(&t.id);
            writeln!(
                out,
                "{indent}{label}  {}  [{} {}{}]  {}  · {} tokens · {}",
                t.path,
                status_text(t),
                t.phase,
                archived,
                t.name,
                thousands(u.total_tokens()),
                usd(u.cost_usd)
            )?;
        }
    }
    Ok(())
}

fn ancestors_listed(t: &ThreadRow, all: &[&ThreadRow]) -> usize {
    let mut n = 0;
    let mut p = t.parent_path.as_deref();
    while let Some(path) = p {
        if all.iter().any(|o| o.path == path) {
            n += 1;
        }
        p = crate::paths::parent_path(path);
    }
    n
}

pub fn show(
    db: &Path,
    reference: &str,
    manager: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let conn = open_read_only(db)?;
    let t = find(&conn, reference, manager)?;
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
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    let (session, contract) = manager_of_thread(&conn, &t.id)?.unwrap_or_default();
    let mut kv = vec![
        ("id", t.id.clone()),
        ("path", t.path.clone()),
        ("name", t.name.clone()),
        ("taskName", t.task_name.clone()),
        ("manager", format!("{session} ({contract})")),
        ("status", status_text(&t)),
        ("phase", t.phase.clone()),
        ("depth", t.depth.to_string()),
        ("cwd", t.cwd.clone()),
        ("args", serde_json::to_string(&t.args)?),
        ("archived", t.archived.to_string()),
        ("createdAt", t.created_at.clone()),
        ("lastEventAt", t.last_event_at.clone()),
    ];
    if let Some(s) = &t.agent_state {
        kv.push(("state", s.clone()));
    }
    if let Some(k) = &t.exit_kind {
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
    manager: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let conn = open_read_only(db)?;
    let t = find(&conn, reference, manager)?;
    let evs = events::of_thread(&conn, &t.id)?;
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&evs)?)?;
        return Ok(());
    }
    writeln!(out, "{} ({}): {} events retained", t.path, t.id, evs.len())?;
    for e in &evs {
        writeln!(out, "{:>5}  {}  {:<18} {}", e.seq, e.at, e.kind, e.data)?;
    }
    Ok(())
}

/// `events --match GLOB`: the retained events of every matching thread, in path order.
pub fn events_matching(
    db: &Path,
    matching: &str,
    manager: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let globs = path_globs(&[matching.to_string()])?;
    let conn = open_read_only(db)?;
    let mut listing = list_every_manager(&conn, StateFilter::All, VisibilityFilter::All)?;
    narrow(&mut listing, &globs);
    if let Some(session) = manager {
        let mut keep = Vec::new();
        for t in listing.threads {
            let (s, _) = manager_of_thread(&conn, &t.id)?.unwrap_or_default();
            if s == session {
                keep.push(t);
            }
        }
        listing.threads = keep;
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
        let evs = events::of_thread(&conn, &t.id)?;
        writeln!(out, "{} ({}): {} events retained", t.path, t.id, evs.len())?;
        for e in &evs {
            writeln!(out, "{:>5}  {}  {:<18} {}", e.seq, e.at, e.kind, e.data)?;
        }
    }
    Ok(())
}

/// Finds a thread for the CLI. With `--manager`, contract A's full resolution inside that
/// manager; without, an id, else an exact path, else a task name across every manager.
pub(super) fn find(conn: &Connection, reference: &str, manager: Option<&str>) -> Result<ThreadRow> {
    if let Some(session) = manager {
        let mut last_err = None;
        for contract in [Contract::Thread, Contract::Agent, Contract::Worker] {
            if let Some(id) = manager_id(conn, session, contract)? {
                let scope = RefScope {
                    manager_id: id,
                    current_path: crate::paths::ROOT,
                    self_id: None,
                };
                match resolve(conn, scope, reference) {
                    Ok(t) => return Ok(t),
                    Err(e) => last_err = Some(e),
                }
            }
        }
        return Err(last_err.unwrap_or_else(|| {
            Error::new(
                ErrorCode::UnknownReference,
                format!("No manager with session id {}. Repair: list managers with `threadbase sql \"SELECT session_id, contract FROM managers\"`.", json_quote(session)),
            )
        }));
    }
    let text = reference.trim();
    if let Some(t) = thread_by_id_any(conn, text)? {
        return Ok(t);
    }
    let path = if text.starts_with('/') {
        text.to_string()
    } else {
        format!("/root/{}", text.trim_start_matches("root/"))
    };
    let by_path = query_threads(
        conn,
        include_str!("../../sql/thread_by_path_any.sql"),
        (&path, CANDIDATES),
    )?;
    let by_path = if by_path.is_empty() && text.starts_with('/') {
        Vec::new()
    } else {
        by_path
    };
    let candidates = if by_path.is_empty() {
        query_threads(
            conn,
            include_str!("../../sql/thread_by_name_any.sql"),
            (text, CANDIDATES),
        )?
    } else {
        by_path
    };
    match candidates.len() {
        1 => Ok(candidates.into_iter().next().expect("one candidate")),
        0 => Err(Error::new(
            ErrorCode::UnknownReference,
            format!(
                "Unknown thread reference: {}. Accepted reference forms: thread id, canonical path, or task name. Repair: run `threadbase list` to see the stored threads.",
                json_quote(reference)
            ),
        )),
        _ => {
            let mut items = Vec::new();
            for t in &candidates {
                let (session, _) = manager_of_thread(conn, &t.id)?.unwrap_or_default();
                items.push(format!("{} (id: {}, manager: {session})", t.path, t.id));
            }
            Err(Error::new(
                ErrorCode::AmbiguousReference,
                format!(
                    "Ambiguous thread reference {}. Candidates: {}. Repair: use a thread id, or pass --manager SESSION_ID.",
                    json_quote(reference),
                    items.join(", ")
                ),
            ))
        }
    }
}

fn status_text(t: &ThreadRow) -> String {
    match &t.agent_state {
        Some(s) => format!("{} ({s})", t.status),
        None => t.status.clone(),
    }
}

fn exit_text(t: &ThreadRow, kind: &str) -> String {
    let mut s = kind.to_string();
    if let Some(c) = t.exit_code {
        s.push_str(&format!(" code={c}"));
    }
    if let Some(sig) = &t.exit_signal {
        s.push_str(&format!(" signal={sig}"));
    }
    if let Some(m) = &t.exit_message {
        s.push_str(&format!(" ({m})"));
    }
    s
}

fn thread_json(conn: &Connection, t: &ThreadRow) -> Result<Value> {
    let (session, contract) = manager_of_thread(conn, &t.id)?.unwrap_or_default();
    let mut v = serde_json::to_value(t)?;
    if let Value::Object(m) = &mut v {
        m.insert("manager_session".into(), Value::from(session));
        m.insert("contract".into(), Value::from(contract));
    }
    Ok(v)
}
