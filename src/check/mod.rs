//! `threadbase check`: verifies a database without changing it.
//!
//! The file is opened read-only (a missing file is never created). SQLite's own checks run
//! first (`PRAGMA integrity_check`, `PRAGMA foreign_key_check`), then the engine's invariants,
//! each one query in `sql/check_*.sql`. Every problem has a stable code, a severity, a message
//! naming the rows, and a repair (a command or an action). A check that cannot run (for example
//! because a page it reads is corrupt) is itself reported as an error, so a damaged file still
//! gets a full report instead of a panic.

use std::path::Path;

use crate::domain::{CommandKind, CommandState, Phase};
use crate::error::{Error, Result};
use crate::identity::{Owner, ProcessIdentity};
use crate::store::check::{self, *};
use crate::store::db::Row;
use crate::store::{database_url, no_database, open_read_only, Conn, ReadTx};

/// A live thread without a pid is a launch in flight (the row is reserved before the process
/// is spawned) for at most this long after it was created.
pub const LAUNCH_GRACE_SECS: f64 = 10.0;

/// At most this many problems are listed per check; the rest are counted in one more entry.
pub const MAX_PER_CHECK: usize = 20;

mod hosts;
mod report;
mod sqlite;
mod worktrees;
pub use report::{write_text, Problem, Report, Severity};

/// Checks the database at `path`. `Err` means the file cannot be checked at all (missing, not a
/// database, not a threadbase database, unreadable header); problems inside it are in the
/// report.
pub fn check_path(path: &Path) -> Result<Report> {
    if database_url(path).is_some() {
        let conn = open_read_only(path)?;
        return check_connection(&conn, &path.display().to_string());
    }
    if !path.exists() {
        let e = no_database(path);
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
    let tables = check::tables(conn).map_err(|e| unreadable(name, e))?;
    if tables < 3 {
        return Err(Error::io(format!(
            "{name} is a SQLite database but not a threadbase database (no threads/thread_events/managers tables); nothing was checked. Repair: pass --db with a threadbase database file."
        )));
    }
    // One read transaction: every check sees the same snapshot even while serves write.
    let read = ReadTx::begin(conn).map_err(|e| unreadable(name, e))?;
    let mut c = Checker {
        conn: &read,
        name,
        report: Report::default(),
    };
    // SQLite's own checks of its file; a PostgreSQL server checks its pages and foreign keys
    // itself (they find nothing to run there).
    c.integrity();
    c.foreign_keys();
    c.counts();
    c.run("duplicate_path", Look::DuplicatePaths, |r| {
        use duplicate_path_col as c;
        let (manager, path, n, ids): (i64, String, i64, String) = (r.get(c::MANAGER_ID)?, r.get(c::PATH)?, r.get(c::THREADS)?, r.get(c::IDS)?);
        Ok(Some(Problem {
            check: "duplicate_path",
            severity: Severity::Error,
            message: format!("{n} threads of manager {manager} share the path {path}: {ids}."),
            repair: "The UNIQUE (manager_id, path) constraint was bypassed (the schema was edited): restore the database from a copy, or with no serve running move all but one of them to a free path with sqlite3 (UPDATE threads SET path = …, task_name = … WHERE id = …) and rebuild the schema (sqlite3 DB .recover | sqlite3 NEW.sqlite).".into(),
        }))
    });
    c.run("event_orphan", Look::OrphanEvents, |r| {
        use orphan_events_col as c;
        let (id, n, lo, hi): (String, i64, i64, i64) = (r.get(c::THREAD_ID)?, r.get(c::EVENTS)?, r.get(c::LO)?, r.get(c::HI)?);
        Ok(Some(Problem {
            check: "event_orphan",
            severity: Severity::Error,
            message: format!("{n} event(s) (seq {lo}..{hi}) belong to thread {id}, which does not exist."),
            repair: format!("With no serve running, delete them: sqlite3 DB \"DELETE FROM thread_events WHERE thread_id = '{id}'\" (foreign keys were off when they were written)."),
        }))
    });
    c.run("event_seq_order", Look::EventOrder, |r| {
        use event_order_col as c;
        let (id, prev_seq, prev_at, seq, at): (String, i64, String, i64, String) =
            (r.get(c::THREAD_ID)?, r.get(c::PREV_SEQ)?, r.get(c::PREV_AT)?, r.get(c::SEQ)?, r.get(c::AT)?);
        Ok(Some(Problem {
            check: "event_seq_order",
            severity: Severity::Error,
            message: format!("Thread {id}: event seq {seq} (at {at}) comes after seq {prev_seq} (at {prev_at}); seq must grow with time."),
            repair: "Events were written out of order by something other than threadbase; read them with `threadbase events REF` and restore the database from a copy if the history matters.".into(),
        }))
    });
    c.run("last_seq_behind", Look::LastSeq, |r| {
        use last_seq_col as c;
        let (id, path, last, max): (String, String, i64, i64) = (r.get(c::ID)?, r.get(c::PATH)?, r.get(c::LAST_SEQ)?, r.get(c::MAX_SEQ)?);
        Ok(Some(Problem {
            check: "last_seq_behind",
            severity: Severity::Error,
            message: format!("Thread {id} ({path}) has last_seq {last} but stores an event with seq {max}; its next event would collide."),
            repair: format!("With no serve running: sqlite3 DB \"UPDATE threads SET last_seq = {max} WHERE id = '{id}'\"."),
        }))
    });
    c.live_threads();
    c.run("path_mismatch", Look::PathShape, |r| {
        use path_shape_col as c;
        let (id, path, parent, task): (String, String, Option<String>, String) = (r.get(c::ID)?, r.get(c::PATH)?, r.get(c::PARENT_PATH)?, r.get(c::TASK_NAME)?);
        let expected = format!("{}/{task}", parent.as_deref().unwrap_or(""));
        Ok(Some(Problem {
            check: "path_mismatch",
            severity: Severity::Error,
            message: format!("Thread {id} has path {path} but parent_path + '/' + task_name is {expected}."),
            repair: "The CHECK constraint was bypassed; with no serve running, set path, parent_path and task_name consistently with sqlite3, or restore the database from a copy.".into(),
        }))
    });
    c.run("parent_mismatch", Look::ParentLinks, |r| {
        use parent_link_col as c;
        let (id, path, parent_id, parent_path): (String, String, String, Option<String>) =
            (r.get(c::ID)?, r.get(c::PATH)?, r.get(c::PARENT_ID)?, r.get(c::PARENT_PATH)?);
        let (found, same_manager, found_path): (Option<String>, Option<bool>, Option<String>) =
            (r.get(c::FOUND)?, r.get(c::SAME_MANAGER)?, r.get(c::FOUND_PATH)?);
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
    c.run("usage_row_missing", Look::UsageRows, |r| {
        use usage_rows_col as c;
        let (id, path, no_place, no_usage): (String, String, bool, bool) = (r.get(c::ID)?, r.get(c::PATH)?, r.get(c::NO_PLACE)?, r.get(c::NO_USAGE)?);
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
    c.run("usage_total_mismatch", Look::UsageTotals, |r| {
        use usage_totals_col as c;
        let (root, t_threads, t_tokens, t_cost, s_threads, s_tokens, s_cost): (String, Option<i64>, Option<i64>, Option<f64>, i64, i64, f64) =
            (r.get(c::ROOT_SESSION)?, r.get(c::T_THREADS)?, r.get(c::T_TOKENS)?, r.get(c::T_COST)?, r.get(c::S_THREADS)?, r.get(c::S_TOKENS)?, r.get(c::S_COST)?);
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
    c.run("closed_without_exit", Look::ClosedWithoutExit, |r| {
        use closed_without_exit_col as c;
        let (id, path): (String, String) = (r.get(c::ID)?, r.get(c::PATH)?);
        Ok(Some(Problem {
            check: "closed_without_exit",
            severity: Severity::Error,
            message: format!("Thread {id} ({path}) is closed but records no exit kind."),
            repair: format!("With no serve running: sqlite3 DB \"UPDATE threads SET exit_kind = 'stale' WHERE id = '{id}'\"."),
        }))
    });
    c.run("stale_mailbox", Look::StaleMailbox, |r| {
        use stale_mailbox_col as c;
        let (mid, tid, path, direction, kind, session): (i64, String, String, String, String, String) =
            (r.get(c::ID)?, r.get(c::THREAD_ID)?, r.get(c::PATH)?, r.get(c::DIRECTION)?, r.get(c::KIND)?, r.get(c::SESSION_ID)?);
        if owners_alive(r, c::COUNT)? {
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
    c.run("stale_command", Look::StaleCommands, |r| {
        use stale_command_col as c;
        let (cid, tid, path, kind, state): (i64, String, String, CommandKind, CommandState) =
            (r.get(c::ID)?, r.get(c::THREAD_ID)?, r.get(c::PATH)?, r.get(c::KIND)?, r.get(c::STATE)?);
        if owners_alive(r, c::COUNT)? {
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
    c.worktrees();
    c.host_collisions();
    let mut report = c.report;
    drop(read);
    report.ok = report.errors() == 0;
    Ok(report)
}

/// Whether either serve of the [`owners_col`] row that starts at position `first` of `r` is
/// alive.
fn owners_alive(r: &Row<'_>, first: usize) -> Result<bool> {
    use owners_col as c;
    let ids = [
        (
            r.get::<Option<i64>>(first + c::THREAD_OWNER_PID)?,
            r.get::<Option<i64>>(first + c::THREAD_OWNER_STARTED_AT)?,
            r.get::<Option<String>>(first + c::THREAD_OWNER_HOST)?,
            r.get::<Option<String>>(first + c::THREAD_OWNER_BOOT)?,
        ),
        (
            r.get(first + c::MANAGER_OWNER_PID)?,
            r.get(first + c::MANAGER_OWNER_STARTED_AT)?,
            r.get(first + c::MANAGER_OWNER_HOST)?,
            r.get(first + c::MANAGER_OWNER_BOOT)?,
        ),
    ];
    Ok(ids.iter().any(|(pid, started, host, boot)| {
        Owner::recorded(*pid, *started, host.as_deref(), boot.as_deref())
            .is_some_and(|o| o.is_alive())
    }))
}

fn unreadable(name: &str, e: Error) -> Error {
    Error::io(format!(
        "Cannot read {name}, so nothing was checked: {}",
        e.message
    ))
}

struct Checker<'a> {
    conn: &'a Conn,
    name: &'a str,
    report: Report,
}

impl Checker<'_> {
    fn push(&mut self, p: Problem) {
        self.report.problems.push(p);
    }

    /// A check whose query failed (a corrupt page, for example) is an error of its own.
    fn failed(&mut self, check: &'static str, e: Error) {
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
        look: Look,
        mut f: impl FnMut(&Row<'_>) -> Result<Option<Problem>>,
    ) {
        let result = (|| -> Result<(Vec<Problem>, usize)> {
            let (mut kept, mut more) = (Vec::new(), 0usize);
            check::each(self.conn, look, |row| {
                if let Some(p) = f(row)? {
                    if kept.len() < MAX_PER_CHECK {
                        kept.push(p);
                    } else {
                        more += 1;
                    }
                }
                Ok(())
            })?;
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

    fn counts(&mut self) {
        match check::counts(self.conn) {
            Ok(n) => {
                for (k, v) in n {
                    self.report.checked.insert(k, v);
                }
            }
            Err(e) => self.failed("counts", e),
        }
    }

    fn live_threads(&mut self) {
        let result = check::live_threads(self.conn);
        let rows = match result {
            Ok(rows) => rows,
            Err(e) => return self.failed("live_owner_gone", e),
        };
        let (mut gone, mut pidless, mut dead_child) = (Vec::new(), Vec::new(), Vec::new());
        // Issue 46: a row of another host is judged by its host's lease, read once when the
        // first such row comes (a database one host uses never reads it), never by a pid of
        // this host. Per host whose lease ran out: since when, and its live threads.
        let mut leases: Option<std::collections::HashMap<String, (bool, String)>> = None;
        let mut unreachable: std::collections::BTreeMap<String, (Option<String>, Vec<String>)> =
            Default::default();
        for t in rows {
            let LiveThread {
                id,
                path,
                phase,
                session,
                ..
            } = &t;
            let owner = Owner::recorded(
                t.owner_pid,
                t.owner_started,
                t.owner_host.as_deref(),
                t.owner_boot.as_deref(),
            );
            if let (Some(host), true) = (
                t.owner_host.as_deref(),
                owner.is_some_and(|o| o.other_host.is_some()),
            ) {
                if leases.is_none() {
                    match crate::store::hosts::list(self.conn) {
                        Ok(rows) => {
                            leases = Some(
                                rows.into_iter()
                                    .map(|h| (h.host_id, (h.up, h.last_heartbeat)))
                                    .collect(),
                            )
                        }
                        Err(e) => return self.failed("host_unreachable", e),
                    }
                }
                let lease = leases.as_ref().and_then(|l| l.get(host));
                if !lease.is_some_and(|(up, _)| *up) {
                    let entry = unreachable
                        .entry(host.to_string())
                        .or_insert_with(|| (lease.map(|(_, since)| since.clone()), Vec::new()));
                    entry.1.push(format!("{id} ({path})"));
                }
                // Its pids are its host's: nothing here can look them up.
                continue;
            }
            let owner_alive = owner.is_some_and(|o| o.is_alive());
            // The child of a serve of another host cannot be looked up here.
            let child_here = owner.is_none_or(|o| o.here().is_some());
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
            } else if let Some(pid) = t.pid.filter(|_| child_here) {
                // The owner lives; its child should too, unless its exit is being recorded
                // right now (hence a warning).
                if let Some(started_at) = t.process_started {
                    if !ProcessIdentity::here(pid, started_at).is_alive() {
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
        let unreachable = unreachable.into_iter().map(|(host, (since, threads))| {
            let n = threads.len();
            let listed = threads
                .iter()
                .take(MAX_PER_CHECK)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            let more = if n > MAX_PER_CHECK {
                format!(" and {} more", n - MAX_PER_CHECK)
            } else {
                String::new()
            };
            let when = match since {
                Some(since) => format!(
                    "unreachable since {since} (no serve of it renewed its lease within {} s)",
                    crate::store::hosts::LEASE.as_secs()
                ),
                None => "unreachable (no serve of it holds a lease)".to_string(),
            };
            Problem {
                check: "host_unreachable",
                severity: Severity::Warning,
                message: format!(
                    "Host {host} is {when}, and {n} live thread{} held there ({listed}{more}) {} nothing supervising {} from here. If the host comes back, its next serve restores {}.",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "has" } else { "have" },
                    if n == 1 { "it" } else { "them" },
                    if n == 1 { "it" } else { "them" },
                ),
                repair: format!("threadbase host forget {host}"),
            }
        });
        for p in unreachable
            .take(MAX_PER_CHECK)
            .chain(gone.into_iter().take(MAX_PER_CHECK))
            .chain(pidless.into_iter().take(MAX_PER_CHECK))
            .chain(dead_child.into_iter().take(MAX_PER_CHECK))
        {
            self.push(p);
        }
    }
}
