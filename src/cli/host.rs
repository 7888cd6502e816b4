//! `threadbase host list` and `threadbase host forget ID`: the hosts that share the database
//! and their leases (issue 33, `store::hosts`).

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::store::hosts::{self, HostRow, LEASE};

/// `host list`: every host with a serve row, its boot, serves up, last heartbeat, lease and
/// live threads.
pub fn list(db: &Path, json: bool, out: &mut dyn Write) -> Result<()> {
    let store = crate::Store::open_existing(db)?;
    let rows = hosts::list(&store.read()?)?;
    if json {
        writeln!(out, "{}", serde_json::json!({ "hosts": rows }))?;
        return Ok(());
    }
    if rows.is_empty() {
        writeln!(
            out,
            "no serve is recorded in this database (a serve records its host when it starts and removes its row when it ends)"
        )?;
        return Ok(());
    }
    let here = &crate::host::HostIdentity::here().host_id;
    let width = rows
        .iter()
        .map(|r| r.host_id.len())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(
        out,
        "{:width$}  {:8}  {:>6}  {:>4}  {:24}  LEASE",
        "HOST", "BOOT", "SERVES", "LIVE", "LAST HEARTBEAT"
    )?;
    for r in &rows {
        let mark = if &r.host_id == here {
            " (this host)"
        } else {
            ""
        };
        writeln!(
            out,
            "{:width$}  {:8}  {:>6}  {:>4}  {:24}  {}{mark}",
            r.host_id,
            r.boot_id.get(..8).unwrap_or(&r.boot_id),
            r.serves_up,
            r.live_threads,
            r.last_heartbeat,
            lease(r),
        )?;
    }
    Ok(())
}

fn lease(r: &HostRow) -> String {
    if r.up {
        "up".into()
    } else {
        format!("unreachable since {}", r.last_heartbeat)
    }
}

/// `host forget ID`: closes the live threads of a host whose lease ran out as stale, without
/// signalling anything, and drops its serve rows. Refused for this host and for a host that is
/// up.
pub fn forget(db: &Path, host_id: &str, json: bool, out: &mut dyn Write) -> Result<()> {
    let here = &crate::host::HostIdentity::here().host_id;
    if host_id == here {
        return Err(Error::invalid(format!(
            "{host_id} is this host; forget is for another host that went away. Repair: run `threadbase restore`, which closes this host's threads whose serve is gone."
        )));
    }
    let store = crate::Store::open_existing(db)?;
    let (row, live) = {
        let conn = store.read()?;
        let row = hosts::list(&conn)?
            .into_iter()
            .find(|r| r.host_id == host_id);
        (row, hosts::live_threads_of(&conn, host_id)?)
    };
    match &row {
        None if live.is_empty() => {
            return Err(Error::new(crate::error::ErrorCode::UnknownReference, format!(
                "No host {host_id} is known: it has no serve row and holds no live thread. Repair: `threadbase host list` shows the hosts."
            )))
        }
        Some(r) if r.up => {
            return Err(Error::conflict(format!(
                "Host {host_id} is up: {} of its serves beat at {} or later, within the lease ({} s); nothing was changed. Repair: stop its serves, or wait until the lease runs out ({} s after the host went away), then forget it.",
                r.serves_up,
                r.last_heartbeat,
                LEASE.as_secs(),
                LEASE.as_secs()
            )))
        }
        _ => {}
    }
    let report = crate::engine::forget_host(&store, host_id)?;
    store.write(|tx| hosts::forget(tx, host_id))?;
    if json {
        let doc = serde_json::json!({"host": host_id, "closed": report.restored});
        writeln!(out, "{doc}")?;
    } else {
        let n = report.restored.len();
        writeln!(
            out,
            "forgot host {host_id}: closed {n} live thread{} as stale; nothing was signalled",
            if n == 1 { "" } else { "s" }
        )?;
    }
    Ok(())
}
