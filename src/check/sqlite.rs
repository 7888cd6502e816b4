//! SQLite's own checks, which run before the engine's invariants: `PRAGMA integrity_check`
//! and `PRAGMA foreign_key_check`.

use std::collections::BTreeMap;

use super::{Checker, Problem, Severity, MAX_PER_CHECK};
use crate::store::sqlite;

impl Checker<'_> {
    pub(super) fn integrity(&mut self) {
        match sqlite::integrity_check(self.conn) {
            Ok(None) => {}
            Ok(Some(lines)) if lines.len() == 1 && lines[0] == "ok" => {}
            Ok(Some(lines)) => {
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

    pub(super) fn foreign_keys(&mut self) {
        // Events without a thread are reported by event_orphan, with a targeted repair.
        match sqlite::foreign_key_check(self.conn) {
            Ok(None) => {}
            Ok(Some(rows)) => {
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
}
