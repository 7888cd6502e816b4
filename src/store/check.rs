//! `threadbase check`: verifies a database without changing it.
//!
//! The file is opened read-only (a missing file is never created). SQLite's own checks run
//! first (`PRAGMA integrity_check`, `PRAGMA foreign_key_check`), then the engine's invariants,
//! each one query in `sql/check_*.sql`. Every problem has a stable code, a severity, a message
//! naming the rows, and a repair (a command or an action). A check that cannot run (for example
//! because a page it reads is corrupt) is itself reported as an error, so a damaged file still
//! gets a full report instead of a panic.

use crate::store::Conn;
use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::Connection;
use serde::Serialize;
use serde_json::{json, Value};

use crate::domain::{CommandKind, CommandState, Phase};
use crate::error::{Error, Result};
use crate::process::ProcessIdentity;
use crate::store::open_read_only;

/// A live thread without a pid is a launch in flight (the row is reserved before the process
/// is spawned) for at most this long after it was created.
pub const LAUNCH_GRACE_SECS: f64 = 10.0;

/// At most this many problems are listed per check; the rest are counted in one more entry.
pub const MAX_PER_CHECK: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// A stable code, e.g. `live_owner_gone`.
    pub check: &'static str,
    pub severity: Severity,
    pub message: String,
    /// A command to run or an action to take.
    pub repair: String,
}

/// The result of a check.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub ok: bool,
    pub problems: Vec<Problem>,
    /// Rows checked per table (`threads`, `events`, …).
    pub checked: BTreeMap<&'static str, i64>,
}

impl Report {
    pub fn errors(&self) -> usize {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count()
    }
    pub fn warnings(&self) -> usize {
        self.problems.len() - self.errors()
    }
    /// The problems with code `check`.
    pub fn with_code(&self, check: &str) -> Vec<&Problem> {
        self.problems.iter().filter(|p| p.check == check).collect()
    }
    pub fn to_json(&self) -> Value {
        json!({"ok": self.ok, "problems": self.problems, "checked": self.checked})
    }
}

/// Checks the database at `path`. `Err` means the file cannot be checked at all (missing, not a
/// database, not a threadbase database, unreadable header); problems inside it are in the
/// report.
pub fn check_path(path: &Path) -> Result<Report> {
    if !path.exists() {
        let e = super::no_database(path);
        let message = e.message.replacen(
            ". Repair:",
            "; nothing was checked (check never creates a database). Repair:",
            1,
        );
        return Err(e.with_message(message));
    }
    if path.is_dir() {
        return Err(Error::io(format!(
            "{} is a folder, not a database file. Repair: pass --db with the database file inside it (threadbase.sqlite).",
            path.display()
        )));
    }
    let conn = open_read_only(path)?;
    check_connection(&conn, &path.display().to_string())
}

/// Checks an open connection (read-only use only). `name` names the database in messages.
pub fn check_connection(conn: &Conn, name: &str) -> Result<Report> {
    // The first read parses the header and the schema: a file that fails here cannot be checked.
    let tables: i64 = conn
        .db()
        .prepare_cached(include_str!("../../sql/check_is_threadbase.sql"))
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(|e| unreadable(name, e))?;
    if tables < 3 {
        return Err(Error::io(format!(
            "{name} is a SQLite database but not a threadbase database (no threads/thread_events/managers tables); nothing was checked. Repair: pass --db with a threadbase database file."
        )));
    }
    // One read transaction: every check sees the same snapshot even while serves write.
    conn.db()
        .execute_batch("BEGIN")
        .map_err(|e| unreadable(name, e))?;
    let mut c = Checker {
        conn: conn.db(),
        name,
        report: Report::default(),
    };
    c.integrity();
    c.foreign_keys();
    c.counts();
    c.run("duplicate_path", include_str!("../../sql/check_duplicate_paths.sql"), |r| {
        let (manager, path, n, ids): (i64, String, i64, String) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        Ok(Some(Problem {
            check: "duplicate_path",
            severity: Severity::Error,
            message: format!("{n} threads of manager {manager} share the path {path}: {ids}."),
            repair: "The UNIQUE (manager_id, path) constraint was bypassed (the schema was edited): restore the database from a copy, or with no serve running move all but one of them to a free path with sqlite3 (UPDATE threads SET path = …, task_name = … WHERE id = …) and rebuild the schema (sqlite3 DB .recover | sqlite3 NEW.sqlite).".into(),
        }))
    });
    c.run("event_orphan", include_str!("../../sql/check_orphan_events.sql"), |r| {
        let (id, n, lo, hi): (String, i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        Ok(Some(Problem {
            check: "event_orphan",
            severity: Severity::Error,
            message: format!("{n} event(s) (seq {lo}..{hi}) belong to thread {id}, which does not exist."),
            repair: format!("With no serve running, delete them: sqlite3 DB \"DELETE FROM thread_events WHERE thread_id = '{id}'\" (foreign keys were off when they were written)."),
        }))
    });
    c.run("event_seq_order", include_str!("../../sql/check_event_order.sql"), |r| {
        let (id, prev_seq, prev_at, seq, at): (String, i64, String, i64, String) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
        Ok(Some(Problem {
            check: "event_seq_order",
            severity: Severity::Error,
            message: format!("Thread {id}: event seq {seq} (at {at}) comes after seq {prev_seq} (at {prev_at}); seq must grow with time."),
            repair: "Events were written out of order by something other than threadbase; read them with `threadbase events REF` and restore the database from a copy if the history matters.".into(),
        }))
    });
    c.run("last_seq_behind", include_str!("../../sql/check_last_seq.sql"), |r| {
        let (id, path, last, max): (String, String, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        Ok(Some(Problem {
            check: "last_seq_behind",
            severity: Severity::Error,
            message: format!("Thread {id} ({path}) has last_seq {last} but stores an event with seq {max}; its next event would collide."),
            repair: format!("With no serve running: sqlite3 DB \"UPDATE threads SET last_seq = {max} WHERE id = '{id}'\"."),
        }))
    });
    c.live_threads();
    c.run("path_mismatch", include_str!("../../sql/check_path_shape.sql"), |r| {
        let (id, path, parent, task): (String, String, Option<String>, String) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        let expected = format!("{}/{task}", parent.as_deref().unwrap_or(""));
        Ok(Some(Problem {
            check: "path_mismatch",
            severity: Severity::Error,
            message: format!("Thread {id} has path {path} but parent_path + '/' + task_name is {expected}."),
            repair: "The CHECK constraint was bypassed; with no serve running, set path, parent_path and task_name consistently with sqlite3, or restore the database from a copy.".into(),
        }))
    });
    c.run("parent_mismatch", include_str!("../../sql/check_parent_links.sql"), |r| {
        let (id, path, parent_id, parent_path): (String, String, String, Option<String>) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        let (found, same_manager, found_path): (Option<String>, Option<bool>, Option<String>) =
            (r.get(4)?, r.get(5)?, r.get(6)?);
        let why = match (found, same_manager) {
            (None, _) => format!("names {parent_id}, which does not exist"),
            (Some(_), Some(false)) => format!(
                "names {parent_id}, a thread of another manager that is not the thread this manager runs in (self_thread_id)"
            ),
            _ => format!(
                "names {parent_id} at {}, but parent_path is {}",
                found_path.unwrap_or_default(),
                parent_path.as_deref().unwrap_or("NULL")
            ),
        };
        Ok(Some(Problem {
            check: "parent_mismatch",
            severity: Severity::Error,
            message: format!("Thread {id} ({path}): parent_id {why}."),
            repair: format!("With no serve running: sqlite3 DB \"UPDATE threads SET parent_id = (SELECT p.id FROM threads p WHERE p.manager_id = threads.manager_id AND p.path = threads.parent_path) WHERE id = '{id}'\"."),
        }))
    });
    c.run("usage_row_missing", include_str!("../../sql/check_usage_rows.sql"), |r| {
        let (id, path, no_place, no_usage): (String, String, bool, bool) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        let mut repair = String::from("With no serve running: sqlite3 DB \"");
        if no_place {
            repair.push_str(&format!("INSERT INTO thread_places (thread_id, root_session, forest_parent_id, tree_key, level) SELECT t.id, m.session_id, NULL, '/' || replace(t.task_name, '_', '!') || ' ' || t.id, 1 FROM threads t JOIN managers m ON m.id = t.manager_id WHERE t.id = '{id}'; "));
        }
        if no_usage {
            repair.push_str(&format!("INSERT INTO thread_usage (thread_id, updated_at) VALUES ('{id}', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"));
        }
        repair.push_str(if no_place {
            "\" (the thread then starts a tree of its own), then run threadbase check again and follow its usage_total_mismatch repair."
        } else {
            "\" (its usage counts from zero), then run threadbase check again and follow its usage_total_mismatch repair."
        });
        Ok(Some(Problem {
            check: "usage_row_missing",
            severity: Severity::Error,
            message: format!(
                "Thread {id} ({path}) has no {}; usage, rollups and budgets leave it out.",
                match (no_place, no_usage) {
                    (true, true) => "place in the tree (thread_places) and no usage row (thread_usage)",
                    (true, false) => "place in the tree (thread_places)",
                    _ => "usage row (thread_usage)",
                }
            ),
            repair,
        }))
    });
    c.run("usage_total_mismatch", include_str!("../../sql/check_usage_totals.sql"), |r| {
        let (root, t_threads, t_tokens, t_cost, s_threads, s_tokens, s_cost): (String, Option<i64>, Option<i64>, Option<f64>, i64, i64, f64) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?);
        let stored = match (t_threads, t_tokens, t_cost) {
            (Some(n), Some(t), Some(c)) => format!("records {n} threads, {t} tokens, ${c:.6}"),
            _ => "has no tree_usage row".to_string(),
        };
        Ok(Some(Problem {
            check: "usage_total_mismatch",
            severity: Severity::Error,
            message: format!("The tree of session {root} {stored}, but its threads' rows add up to {s_threads} threads, {s_tokens} tokens, ${s_cost:.6}; budgets read the total."),
            repair: format!("With no serve running, recompute it: sqlite3 DB \"DELETE FROM tree_usage WHERE root_session = '{root}'; INSERT INTO tree_usage SELECT p.root_session, count(*), sum(u.input_tokens), sum(u.output_tokens), sum(u.cache_read_tokens), sum(u.cache_write_tokens), sum(u.cost_usd), sum(u.turns), sum(u.tool_calls), max(u.updated_at) FROM thread_places p JOIN thread_usage u ON u.thread_id = p.thread_id WHERE p.root_session = '{root}' GROUP BY p.root_session\"."),
        }))
    });
    c.run("closed_without_exit", include_str!("../../sql/check_closed_without_exit.sql"), |r| {
        let (id, path): (String, String) = (r.get(0)?, r.get(1)?);
        Ok(Some(Problem {
            check: "closed_without_exit",
            severity: Severity::Error,
            message: format!("Thread {id} ({path}) is closed but records no exit kind."),
            repair: format!("With no serve running: sqlite3 DB \"UPDATE threads SET exit_kind = 'stale' WHERE id = '{id}'\"."),
        }))
    });
    c.run("stale_mailbox", include_str!("../../sql/check_stale_mailbox.sql"), |r| {
        let (mid, tid, path, direction, kind, session): (i64, String, String, String, String, String) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?);
        if owners_alive(r, 6)? {
            return Ok(None);
        }
        let repair = if direction == "to_parent" {
            format!("Start the Pi session {session} again (its serve delivers pending notices), or drop it with no serve running: sqlite3 DB \"UPDATE mailbox SET state = 'failed' WHERE id = {mid}\".")
        } else {
            format!("Resume the thread ({path}) to deliver it, or drop it with no serve running: sqlite3 DB \"UPDATE mailbox SET state = 'failed' WHERE id = {mid}\".")
        };
        Ok(Some(Problem {
            check: "stale_mailbox",
            severity: Severity::Warning,
            message: format!("Mailbox message {mid} ({kind}, {direction}) of closed thread {tid} ({path}) is still pending and no process that could deliver it is alive."),
            repair,
        }))
    });
    c.run("stale_command", include_str!("../../sql/check_stale_commands.sql"), |r| {
        let (cid, tid, path, kind, state): (i64, String, String, CommandKind, CommandState) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
        if owners_alive(r, 5)? {
            return Ok(None);
        }
        let message = if state == CommandState::Running {
            format!("Command {cid} ({kind}) for thread {tid} ({path}) was claimed by a serve that is gone before it finished; nothing will finish it (harmless).")
        } else {
            format!("Command {cid} ({kind}) for closed thread {tid} ({path}) is still pending and its owner is gone; nothing will carry it out (harmless).")
        };
        Ok(Some(Problem {
            check: "stale_command",
            severity: Severity::Warning,
            message,
            repair: format!("Nothing is needed; to clear it with no serve running: sqlite3 DB \"UPDATE commands SET state = 'failed' WHERE id = {cid}\"."),
        }))
    });
    let mut report = c.report;
    let _ = conn.db().execute_batch("COMMIT");
    report.ok = report.errors() == 0;
    Ok(report)
}

/// Reads (thread owner pid, started, manager owner pid, started) at `at..at+4` and says whether
/// either process is alive.
fn owners_alive(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<bool> {
    let ids = [
        (
            r.get::<_, Option<i64>>(at)?,
            r.get::<_, Option<i64>>(at + 1)?,
        ),
        (r.get(at + 2)?, r.get(at + 3)?),
    ];
    Ok(ids.iter().any(|(pid, started)| {
        ProcessIdentity::recorded(*pid, *started).is_some_and(|o| o.is_alive())
    }))
}

fn unreadable(name: &str, e: rusqlite::Error) -> Error {
    let base: Error = e.into();
    Error::io(format!(
        "Cannot read {name}, so nothing was checked: {}",
        base.message
    ))
}

struct Checker<'a> {
    conn: &'a Connection,
    name: &'a str,
    report: Report,
}

impl Checker<'_> {
    fn push(&mut self, p: Problem) {
        self.report.problems.push(p);
    }

    /// A check whose query failed (a corrupt page, for example) is an error of its own.
    fn failed(&mut self, check: &'static str, e: rusqlite::Error) {
        self.push(Problem {
            check: "check_failed",
            severity: Severity::Error,
            message: format!("The {check} check could not run on {}: {e}.", self.name),
            repair: "The file is damaged: stop every serve, copy the database aside, and recover it (sqlite3 DB \".recover\" | sqlite3 NEW.sqlite) or restore a backup.".into(),
        });
    }

    /// Runs one check query; `f` turns a row into a problem (or none).
    fn run(
        &mut self,
        check: &'static str,
        sql: &str,
        mut f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<Option<Problem>>,
    ) {
        let result = (|| -> rusqlite::Result<(Vec<Problem>, usize)> {
            let mut stmt = self.conn.prepare_cached(sql)?;
            let mut rows = stmt.query([])?;
            let (mut kept, mut more) = (Vec::new(), 0usize);
            while let Some(row) = rows.next()? {
                if let Some(p) = f(row)? {
                    if kept.len() < MAX_PER_CHECK {
                        kept.push(p);
                    } else {
                        more += 1;
                    }
                }
            }
            Ok((kept, more))
        })();
        match result {
            Ok((kept, more)) => {
                let last = kept.last().cloned();
                self.report.problems.extend(kept);
                if let (Some(last), true) = (last, more > 0) {
                    self.push(Problem {
                        check: last.check,
                        severity: last.severity,
                        message: format!(
                            "… and {more} more {check} problem(s) like the ones above."
                        ),
                        repair: last.repair,
                    });
                }
            }
            Err(e) => self.failed(check, e),
        }
    }

    fn integrity(&mut self) {
        let result = (|| -> rusqlite::Result<Vec<String>> {
            let mut stmt = self.conn.prepare("PRAGMA integrity_check(100)")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect()
        })();
        match result {
            Ok(lines) if lines.len() == 1 && lines[0] == "ok" => {}
            Ok(lines) => {
                for line in lines.iter().take(MAX_PER_CHECK) {
                    self.push(Problem {
                        check: "integrity",
                        severity: Severity::Error,
                        message: format!("SQLite integrity_check: {line}"),
                        repair: "Stop every serve, copy the database aside, and recover it (sqlite3 DB \".recover\" | sqlite3 NEW.sqlite, then --db NEW.sqlite) or restore a backup.".into(),
                    });
                }
                if lines.len() > MAX_PER_CHECK {
                    self.push(Problem {
                        check: "integrity",
                        severity: Severity::Error,
                        message: format!(
                            "… and {} more integrity_check findings.",
                            lines.len() - MAX_PER_CHECK
                        ),
                        repair: "See above.".into(),
                    });
                }
            }
            Err(e) => self.failed("integrity", e),
        }
    }

    fn foreign_keys(&mut self) {
        // Events without a thread are reported by event_orphan, with a targeted repair.
        let result = (|| -> rusqlite::Result<Vec<(String, Option<i64>, String)>> {
            let mut stmt = self.conn.prepare("PRAGMA foreign_key_check")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect()
        })();
        match result {
            Ok(rows) => {
                let mut per: BTreeMap<(String, String), (usize, Vec<i64>)> = BTreeMap::new();
                for (table, rowid, parent) in rows {
                    if table == "thread_events" && parent == "threads" {
                        continue;
                    }
                    let e = per.entry((table, parent)).or_default();
                    e.0 += 1;
                    if let Some(id) = rowid.filter(|_| e.1.len() < 10) {
                        e.1.push(id);
                    }
                }
                for ((table, parent), (n, ids)) in per {
                    let ids = if ids.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (rowids {})",
                            ids.iter()
                                .map(i64::to_string)
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    };
                    self.push(Problem {
                        check: "foreign_key",
                        severity: Severity::Error,
                        message: format!("{n} row(s) of {table} point at a missing {parent} row{ids}."),
                        repair: format!("With no serve running, list them with sqlite3 DB \"PRAGMA foreign_key_check({table})\" and delete or fix them (they were written with foreign keys off)."),
                    });
                }
            }
            Err(e) => self.failed("foreign_key", e),
        }
    }

    fn counts(&mut self) {
        let result = self
            .conn
            .prepare_cached(include_str!("../../sql/check_counts.sql"))
            .and_then(|mut s| {
                s.query_row([], |r| {
                    Ok([
                        r.get::<_, i64>(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ])
                })
            });
        match result {
            Ok(n) => {
                for (k, v) in [
                    "managers",
                    "threads",
                    "live_threads",
                    "events",
                    "mailbox",
                    "commands",
                ]
                .into_iter()
                .zip(n)
                {
                    self.report.checked.insert(k, v);
                }
            }
            Err(e) => self.failed("counts", e),
        }
    }

    fn live_threads(&mut self) {
        struct Live {
            id: String,
            path: String,
            phase: Phase,
            pid: Option<i64>,
            owner_pid: Option<i64>,
            owner_started: Option<i64>,
            age: Option<f64>,
            session: String,
            process_started: Option<i64>,
        }
        let result = (|| -> rusqlite::Result<Vec<Live>> {
            let mut stmt = self
                .conn
                .prepare_cached(include_str!("../../sql/check_live_threads.sql"))?;
            let rows = stmt.query_map([], |r| {
                Ok(Live {
                    id: r.get(0)?,
                    path: r.get(1)?,
                    phase: r.get(2)?,
                    pid: r.get(3)?,
                    owner_pid: r.get(4)?,
                    owner_started: r.get(5)?,
                    age: r.get(6)?,
                    session: r.get(7)?,
                    process_started: r.get(8)?,
                })
            })?;
            rows.collect()
        })();
        let rows = match result {
            Ok(rows) => rows,
            Err(e) => return self.failed("live_owner_gone", e),
        };
        let (mut gone, mut pidless, mut dead_child) = (Vec::new(), Vec::new(), Vec::new());
        for t in rows {
            let Live {
                id,
                path,
                phase,
                session,
                ..
            } = &t;
            let owner_alive = ProcessIdentity::recorded(t.owner_pid, t.owner_started)
                .is_some_and(|o| o.is_alive());
            let owner = t.owner_pid.unwrap_or(0);
            if !owner_alive {
                let owner = t.owner_pid.map_or("no owner recorded".to_string(), |p| {
                    format!("owner process {p} is gone")
                });
                gone.push(Problem {
                    check: "live_owner_gone",
                    severity: Severity::Error,
                    message: format!(
                        "Thread {id} ({path}, session {session}) is live but its {owner}."
                    ),
                    repair: "threadbase restore".into(),
                });
            } else if let Some(pid) = t.pid {
                // The owner lives; its child should too, unless its exit is being recorded
                // right now (hence a warning).
                if let Some(started_at) = t.process_started {
                    if !(ProcessIdentity { pid, started_at }).is_alive() {
                        dead_child.push(Problem {
                            check: "live_process_gone",
                            severity: Severity::Warning,
                            message: format!("Thread {id} ({path}) is live and its serve (pid {owner}) is alive, but its process {pid} is gone and no exit is recorded."),
                            repair: format!("Run check again in a moment (the serve records exits as they happen); if it stays, stop that serve (pid {owner}) and run `threadbase restore`."),
                        });
                    }
                }
            } else {
                let in_flight =
                    *phase == Phase::Starting && t.age.is_some_and(|a| a < LAUNCH_GRACE_SECS);
                if !in_flight {
                    let age = t
                        .age
                        .map_or("an unreadable time".to_string(), |a| format!("{a:.0} s"));
                    pidless.push(Problem {
                        check: "live_without_pid",
                        severity: Severity::Error,
                        message: format!("Thread {id} ({path}) is live in phase {phase} but records no process, {age} after it was created; its serve (pid {owner}) never recorded a launch."),
                        repair: format!("Stop that serve (pid {owner}) and run `threadbase restore`."),
                    });
                }
            }
        }
        for p in gone
            .into_iter()
            .take(MAX_PER_CHECK)
            .chain(pidless.into_iter().take(MAX_PER_CHECK))
            .chain(dead_child.into_iter().take(MAX_PER_CHECK))
        {
            self.push(p);
        }
    }
}

/// Writes the report as text (the default output of `threadbase check`).
pub fn write_text(report: &Report, name: &str, out: &mut dyn std::io::Write) -> Result<()> {
    let counts: Vec<String> = report
        .checked
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    writeln!(out, "threadbase check: {name}")?;
    writeln!(out, "checked: {}", counts.join(", "))?;
    for p in &report.problems {
        writeln!(
            out,
            "{} [{}] {} Repair: {}",
            p.severity.as_str(),
            p.check,
            p.message,
            p.repair
        )?;
    }
    let (e, w) = (report.errors(), report.warnings());
    if report.problems.is_empty() {
        writeln!(out, "ok: no problems found")?;
    } else {
        writeln!(
            out,
            "{}: {e} error{}, {w} warning{}",
            if report.ok { "ok" } else { "FAILED" },
            if e == 1 { "" } else { "s" },
            if w == 1 { "" } else { "s" }
        )?;
    }
    Ok(())
}
