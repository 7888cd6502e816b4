//! `threadbase check`: verifies the database read-only and reports problems with repairs.
//! Exit 0 when no errors (warnings allowed), 1 when any error was found, 2 when the database
//! cannot be checked at all.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde_json::json;

use crate::check::{check_path, write_text};

pub fn run(db: &Path, json: bool, out: &mut dyn Write) -> ExitCode {
    match check_path(db) {
        Ok(report) => {
            let written = if json {
                writeln!(out, "{}", report.to_json()).map_err(crate::Error::from)
            } else {
                write_text(&report, &db.display().to_string(), out)
            };
            if let Err(e) = written {
                return super::report(&e);
            }
            if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            if json {
                let doc = json!({
                    "ok": false,
                    "error": {"code": e.code.as_str(), "message": e.message},
                    "problems": [],
                    "checked": {},
                });
                let _ = writeln!(out, "{doc}");
            }
            super::report(&e)
        }
    }
}
