//! `threadbase host list` and `threadbase host forget ID`: the hosts that share the database
//! and their leases (issue 33, `store::hosts`).

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::store::hosts::{self, HostRow, LEASE};

/// `host list`: every host with a serve row, its boot, serves up, last heartbeat, lease and
/// live threads; under a host, each serve of it whose heartbeat says it is degraded (its row
/// watcher holds no connection: issue 46).
pub fn list(db: &Path, json: bool, out: &mut dyn Write) -> Result<()> {
    // Read-only: a read never writes, nor checkpoints the WAL on its way out.
    let (rows, collisions, cutoff, degraded) = {
        let conn = crate::store::open_read_only(db)?;
        (
            hosts::list(&conn)?,
            hosts::collisions(&conn)?,
            hosts::cutoff(&conn)?,
            hosts::degraded_serves(&conn)?,
        )
    };
    let collision = |h: &str| collisions.iter().find(|c| c.host_id == h);
    let degraded_of = |h: &str| {
        degraded
            .iter()
            .filter(|d| d.host_id == h)
            .collect::<Vec<_>>()
    };
    if json {
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                v["collision"] = serde_json::json!(collision(&r.host_id).is_some());
                v["degradedServes"] = serde_json::json!(degraded_of(&r.host_id));
                v
            })
            .collect();
        let doc = serde_json::json!({ "hosts": rows, "outageUntil": cutoff.outage_until });
        writeln!(out, "{doc}")?;
        return Ok(());
    }
    if rows.is_empty() {
        writeln!(
            out,
            "no serve is recorded in this database (a serve records its host when it starts and removes its row when it ends)"
        )?;
        return Ok(());
    }
    if let Some(until) = &cutoff.outage_until {
        writeln!(
            out,
            "the database came back from an outage less than a lease ago: no host counts as unreachable before {until}"
        )?;
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
        let clash = match collision(&r.host_id) {
            Some(c) => format!(
                "; COLLISION: held by serves of {} machines or PID spaces at once (set {} to a name unique to each)",
                c.spaces,
                crate::host::HOST_ID_VAR
            ),
            None => String::new(),
        };
        writeln!(
            out,
            "{:width$}  {:8}  {:>6}  {:>4}  {:24}  {}{mark}{clash}",
            r.host_id,
            r.boot_id.get(..8).unwrap_or(&r.boot_id),
            r.serves_up,
            r.live_threads,
            r.last_heartbeat,
            lease(r),
        )?;
        // Issue 46: a serve whose heartbeat says its row watcher holds no connection.
        for d in degraded_of(&r.host_id) {
            writeln!(
                out,
                "  DEGRADED serve pid {} since {}: supervision is not running (no commands carried out, no notices delivered) ({})",
                d.pid, d.since, d.reason
            )?;
        }
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
/// signalling anything, and drops its serve rows. Refused for this host, for a host that is up
/// (the lease's cutoff, which moves back while the database came back from an outage less than
/// a lease ago: issue 46), and without `force` while its last heartbeat is younger than two
/// leases.
pub fn forget(
    db: &Path,
    host_id: &str,
    force: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let here = &crate::host::HostIdentity::here().host_id;
    if host_id == here {
        return Err(Error::invalid(format!(
            "{host_id} is this host; forget is for another host that went away. Repair: run `threadbase restore`, which closes this host's threads whose serve is gone."
        )));
    }
    let store = crate::Store::open_existing(db)?;
    let (row, live, cutoff, two_leases) = {
        let conn = store.read()?;
        let row = hosts::list(&conn)?
            .into_iter()
            .find(|r| r.host_id == host_id);
        (
            row,
            hosts::live_threads_of(&conn, host_id)?,
            hosts::cutoff(&conn)?,
            hosts::plain_cutoff(&conn, 2 * LEASE.as_secs())?,
        )
    };
    match &row {
        None if live.is_empty() => {
            return Err(Error::new(crate::error::ErrorCode::UnknownReference, format!(
                "No host {host_id} is known: it has no serve row and holds no live thread. Repair: `threadbase host list` shows the hosts."
            )))
        }
        Some(r) if r.up && cutoff.outage_until.is_some() => {
            return Err(Error::conflict(format!(
                "Host {host_id} cannot be judged yet: the database came back from an outage less than a lease ago, and its last heartbeat at {} was within the lease when the outage began, so it may be healthy and only waiting to beat again; nothing was changed. Repair: run `threadbase host list` after {} and forget it then if it is still unreachable.",
                r.last_heartbeat,
                cutoff.outage_until.as_deref().unwrap_or_default(),
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
        Some(r) if !force && r.last_heartbeat > two_leases => {
            return Err(Error::conflict(format!(
                "Host {host_id} beat last at {}, less than two leases ({} s) ago: it may be only slow to come back; nothing was changed. Repair: wait until {} s have passed since its last heartbeat, or pass --force if you know its serves are gone.",
                r.last_heartbeat,
                2 * LEASE.as_secs(),
                2 * LEASE.as_secs()
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
