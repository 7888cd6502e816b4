//! The `reports` table: a managed worker's one report (contract C). The engine compares a
//! repeated report with the stored one, so both directions are typed here.

use crate::store::db::{params, q, Row};
use crate::store::Conn;

use crate::domain::WorkerId;
use crate::error::Result;
use crate::store::rows::columns;

columns! {
    /// A report's columns, in order (`{report_row}` in `sql/worker_report.sql` and, after
    /// `{worker_row}`, the worker queries of `store::workers`, which read `reports r`): what
    /// [`ReportRow`] holds, read by these positions.
    pub mod col as "{report_row}" {
        VERDICT = "r.verdict",
        SUMMARY = "r.summary",
        EVIDENCE = "r.evidence",
    }
}

/// A stored report; `evidence` is the parsed JSON array of the `evidence` column.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRow {
    pub verdict: String,
    pub summary: String,
    pub evidence: Vec<String>,
}

impl ReportRow {
    /// The report of the [`col`] row that starts at position `first` of `r` (NULL verdict:
    /// none, as a `LEFT JOIN reports` reads for a worker that has not reported).
    pub(super) fn from_row(r: &Row<'_>, first: usize) -> Result<Option<Self>> {
        let Some(verdict) = r.get(first + col::VERDICT)? else {
            return Ok(None);
        };
        let evidence: String = r.get(first + col::EVIDENCE)?;
        Ok(Some(ReportRow {
            verdict,
            summary: r.get(first + col::SUMMARY)?,
            evidence: serde_json::from_str(&evidence).unwrap_or_default(),
        }))
    }
}

/// A worker's stored report, if it has one.
pub fn report_of(conn: &Conn, worker_id: &WorkerId) -> Result<Option<ReportRow>> {
    Ok(conn
        .opt(q!("worker_report", col), params![worker_id], |r| {
            ReportRow::from_row(r, 0)
        })?
        .flatten())
}

/// A report to admit, with the id of the coordinator's notice about it.
#[derive(Debug, Clone, Copy)]
pub struct NewReport<'a> {
    pub worker_id: &'a WorkerId,
    pub verdict: &'a str,
    pub summary: &'a str,
    pub evidence: &'a [String],
    pub message_id: &'a str,
    pub now: &'a str,
}

/// Admits a worker's only report (the primary key refuses a second one).
pub fn insert_report(conn: &Conn, report: &NewReport<'_>) -> Result<()> {
    conn.execute(
        q!("worker_report_insert"),
        params![
            report.worker_id,
            report.verdict,
            report.summary,
            serde_json::to_string(report.evidence)?,
            report.message_id,
            report.now
        ],
    )?;
    Ok(())
}
