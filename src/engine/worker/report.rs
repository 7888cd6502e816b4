//! `threads_report`, called by the worker's own serve: the report row and the coordinator's
//! notice (a `to_parent` mailbox row) in one transaction; a repeated identical report reads
//! the stored one back.

use super::{check_original, contract_report, find};
use crate::contract::worker::{new_message_id, report_notice_text, Report, Reported};
use crate::domain::WorkerId;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::store::mailbox::{self, Direction, MailKind, NewMail};
use crate::store::reports::{self, NewReport};
use crate::time::now_iso;

/// The mailbox `send_key` of the report notice. User send keys are stored as `send:<key>` and
/// the initial prompt as `spawn`, so no key a caller chooses can collide.
const REPORT_SEND_KEY: &str = "report";

pub(in crate::engine) fn report(e: &Engine, report: Report) -> Result<crate::engine::Reply> {
    let caller = &e.cfg.session_id;
    // A worker's own Pi session's id is its workerID.
    let row = find(&e.store.read()?, &WorkerId::new(caller.as_str()))?.ok_or_else(|| {
        Error::forbidden(format!(
            "Only a managed worker can call threads_report, and this session ({caller}) is not one. Repair: report from inside a worker started with threads_spawn; a coordinator reads reports with threads_list."
        ))
    })?;
    check_original(&row)?;
    let (id, worker_id) = (row.id(), &row.facts.worker_id);
    let message_id = row.report_message_id.clone().unwrap_or_else(new_message_id);
    let notice = report_notice_text(worker_id.as_str(), &row.facts.key, &report);
    let stored = e.store.write(|tx| {
        if let Some(existing) = reports::report_of(tx, worker_id)? {
            let original = contract_report(existing);
            if original != report {
                return Err(Error::conflict(
                    "This worker already has a different report. Start a new task with a new spawn key. Repair: repeat the identical report to read it back, or ask the coordinator to spawn a new worker.",
                ));
            }
            return Ok(original);
        }
        let now = now_iso();
        reports::insert_report(
            tx,
            &NewReport {
                worker_id,
                verdict: &report.verdict,
                summary: &report.summary,
                evidence: &report.evidence,
                message_id: &message_id,
                now: &now,
            },
        )?;
        mailbox::insert(
            tx,
            &NewMail {
                thread_id: id,
                direction: Direction::ToParent,
                kind: MailKind::Report,
                send_key: REPORT_SEND_KEY,
                message_id: Some(&message_id),
                body: &notice,
                recipient: None,
                at: &now,
                delivered: false,
            },
        )?;
        Ok(report.clone())
    })?;
    let worker_id = worker_id.clone();
    Ok(crate::engine::Reply::shaped(move |w| {
        super::tool_result(
            w,
            &Reported {
                worker_id: worker_id.as_str(),
                report: &stored,
            },
        )
    }))
}
