//! `threadbase stop PATTERN…`: stops live threads by path glob from outside any serve. Like
//! top's emergency stop, it writes `commands` rows that the owning serves carry out (only they
//! hold the children's pipes); a thread whose owner is gone gets the restore pass instead.
//! It then waits, bounded, for each thread to be reported closed and prints what happened.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use globset::{GlobSet, GlobSetBuilder};

use crate::domain::{ExitKind, ThreadId, ThreadStatus};
use crate::error::{Error, Result};
use crate::runtime::signals::ProcessIdentity;
use crate::store::commands::{self, CommandKind};
use crate::store::Store;

pub struct StopArgs<'a> {
    pub patterns: &'a [String],
    pub force: bool,
    pub manager: Option<&'a str>,
    pub timeout: Duration,
    pub json: bool,
}

/// Compiles CLI path globs: `*` and `?` stay inside one segment, `**` crosses segments, and a
/// pattern that does not start with `/` may match at any depth (`api_*` = `**/api_*`).
pub fn path_globs(patterns: &[String]) -> Result<GlobSet> {
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        let text = if p.starts_with('/') {
            p.clone()
        } else {
            format!("**/{p}")
        };
        let glob = globset::GlobBuilder::new(&text)
            .literal_separator(true)
            .build()
            .map_err(|e| {
                Error::invalid(format!(
                    "Invalid path pattern {}: {e}. Repair: use a glob such as '/root/api_*' (`*` within a segment, `**` across segments); quote it so the shell does not expand it.",
                    crate::paths::json_quote(p)
                ))
            })?;
        set.add(glob);
    }
    set.build().map_err(|e| {
        Error::invalid(format!(
            "Invalid path patterns: {e}. Repair: use globs such as '/root/api_*'."
        ))
    })
}

/// The `--match GLOB` of list, tree and events: `None` when absent (everything matches).
pub fn optional_globs(pattern: Option<&str>) -> Result<Option<GlobSet>> {
    pattern
        .map(|p| path_globs(std::slice::from_ref(&p.to_string())))
        .transpose()
}

struct Target {
    id: ThreadId,
    path: String,
    session: String,
    owner: Option<crate::identity::Owner>,
    /// Held on another host whose lease ran out: nothing is sent to it.
    unreachable: Option<crate::store::hosts::HostRow>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Closed by its serve after the command row.
    Stopped,
    /// Its owner was gone: the restore pass closed it.
    Restored,
    /// Still live at the deadline; the command row stays pending for its serve.
    Pending,
    /// Held on another host whose lease ran out: no command was written.
    Unreachable,
}

impl Outcome {
    fn word(self) -> &'static str {
        match self {
            Outcome::Stopped => "stopped",
            Outcome::Restored => "restored",
            Outcome::Pending => "pending",
            Outcome::Unreachable => "unreachable",
        }
    }
}

pub fn run(db: &Path, args: &StopArgs<'_>, out: &mut dyn Write) -> ExitCode {
    match stop(db, args, out) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("threadbase: error[{}]: {}", e.code, e.message);
            ExitCode::from(2)
        }
    }
}

fn stop(db: &Path, args: &StopArgs<'_>, out: &mut dyn Write) -> Result<ExitCode> {
    let globs = path_globs(args.patterns)?;
    let store = Store::open_existing(db)?;
    let targets: Vec<Target> = {
        let conn = store.read()?;
        // Every host's lease, read once: a thread held on a host whose lease ran out is said
        // to be unreachable, and nothing is sent to it.
        let leases = crate::store::hosts::list(&conn)?;
        let mut v = Vec::new();
        for t in commands::stop_candidates(&conn, args.manager)? {
            if globs.is_match(&t.path) {
                let elsewhere = t.owner.is_some_and(|o| o.other_host.is_some());
                let unreachable = leases
                    .iter()
                    .find(|h| elsewhere && !h.up && t.owner_host.as_deref() == Some(&h.host_id))
                    .cloned();
                v.push(Target {
                    id: t.id,
                    path: t.path,
                    session: t.session,
                    owner: t.owner,
                    unreachable,
                });
            }
        }
        v
    };
    if targets.is_empty() {
        let scope = args
            .manager
            .map(|m| format!(" of manager {m}"))
            .unwrap_or_default();
        if args.json {
            writeln!(out, "{}", serde_json::json!({"threads": []}))?;
        } else {
            writeln!(
                out,
                "No live thread{scope} matches {}.",
                args.patterns.join(" ")
            )?;
        }
        return Ok(ExitCode::from(1));
    }
    let kind = CommandKind::stop(args.force);
    let (owned, orphaned): (Vec<&Target>, Vec<&Target>) = targets
        .iter()
        .filter(|t| t.unreachable.is_none())
        .partition(|t| t.owner.is_some_and(|o| o.is_alive()));
    store.write(|tx| {
        for t in &owned {
            commands::request(tx, &t.id, kind)?;
        }
        Ok(())
    })?;
    let mut restored = Vec::new();
    if !orphaned.is_empty() {
        let report = crate::engine::restore_dead_owners(&store, ProcessIdentity::current())?;
        restored = report.restored;
    }
    // Wait for the owning serves (they poll the change counter every 200 ms or faster).
    let deadline = Instant::now() + args.timeout;
    let mut outcomes: Vec<Option<(Outcome, Option<ExitKind>)>> = vec![None; targets.len()];
    loop {
        let conn = store.read()?;
        for (i, t) in targets.iter().enumerate() {
            if outcomes[i].is_some() {
                continue;
            }
            if t.unreachable.is_some() {
                outcomes[i] = Some((Outcome::Unreachable, None));
                continue;
            }
            let row: Option<(ThreadStatus, Option<ExitKind>)> =
                commands::stop_outcome(&conn, &t.id)?;
            match row {
                Some((status, exit)) if status != ThreadStatus::Live => {
                    let how = if restored.contains(&t.id) {
                        Outcome::Restored
                    } else {
                        Outcome::Stopped
                    };
                    outcomes[i] = Some((how, exit));
                }
                None => outcomes[i] = Some((Outcome::Stopped, None)),
                Some(_) => {}
            }
        }
        drop(conn);
        if outcomes.iter().all(Option::is_some) || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let outcomes: Vec<(Outcome, Option<ExitKind>)> = outcomes
        .into_iter()
        .map(|o| o.unwrap_or((Outcome::Pending, None)))
        .collect();
    let pending = outcomes
        .iter()
        .filter(|(o, _)| matches!(o, Outcome::Pending | Outcome::Unreachable))
        .count();
    if args.json {
        let items: Vec<serde_json::Value> = targets
            .iter()
            .zip(&outcomes)
            .map(|(t, (o, exit))| {
                serde_json::json!({
                    "id": t.id, "path": t.path, "managerSession": t.session,
                    "outcome": o.word(), "exit": exit,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::json!({ "threads": items }))?;
    } else {
        for (t, (o, exit)) in targets.iter().zip(&outcomes) {
            let detail = match (o, exit) {
                (Outcome::Stopped, Some(k)) => format!("exit {k}"),
                (Outcome::Stopped, None) => "closed".to_string(),
                (Outcome::Restored, _) => "its serve is gone; closed as stale".to_string(),
                (Outcome::Pending, _) => format!(
                    "still live after {:.1} s; the stop request stays queued for its serve",
                    args.timeout.as_secs_f64()
                ),
                (Outcome::Unreachable, _) => match &t.unreachable {
                    Some(l) => format!(
                        "held on host {}, unreachable since {}; nothing was sent (Repair: `threadbase host forget {}` closes its threads as stale)",
                        l.host_id, l.last_heartbeat, l.host_id
                    ),
                    None => "unreachable".to_string(),
                },
            };
            writeln!(
                out,
                "{:<8} {}  ({}, manager {})  {detail}",
                o.word(),
                t.path,
                t.id,
                t.session
            )?;
        }
        writeln!(
            out,
            "{} of {} thread{} closed",
            targets.len() - pending,
            targets.len(),
            if targets.len() == 1 { "" } else { "s" }
        )?;
        let others = restored
            .iter()
            .filter(|id| !targets.iter().any(|t| &t.id == *id))
            .count();
        if others > 0 {
            writeln!(
                out,
                "The restore pass also closed {others} other thread{} whose serve is gone.",
                if others == 1 { "" } else { "s" }
            )?;
        }
    }
    Ok(if pending == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
