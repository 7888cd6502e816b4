//! What `threadbase check` reports: its problems (a stable code, a severity, a message and
//! a repair), the rows it checked, and the report as text or JSON.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::error::Result;

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
