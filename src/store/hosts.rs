//! The hosts that share a database and their leases (issue 33): every serve keeps a row in
//! `host_serves` (its host, boot, pid and start) whose `heartbeat_at` it refreshes every
//! [`HEARTBEAT`] with the database's own clock, not its host's. A host is up while one of its
//! serves' heartbeats is younger than [`LEASE`]; then it is unreachable since its last one.
//! `threadbase host list` shows them; `threadbase host forget ID` closes an unreachable host's
//! threads as stale, on purpose only.

use std::time::Duration;

use crate::error::Result;
use crate::process::ProcessIdentity;
use crate::store::db::{named, params, q, Row};
use crate::store::rows::columns;
use crate::store::Conn;

/// How long a host stays up after its last heartbeat.
pub const LEASE: Duration = Duration::from_secs(30);
/// How often a serve refreshes its heartbeat.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// Records (or refreshes) the heartbeat of the serve `me` on this host, and drops the rows
/// of this host's serves that stopped beating more than two leases ago (they died without
/// saying so, or belong to an earlier boot).
pub fn heartbeat(conn: &Conn, me: ProcessIdentity) -> Result<()> {
    let here = crate::host::HostIdentity::here();
    conn.execute(
        q!("host_heartbeat"),
        named! {
            ":host": here.host_id.as_str(), ":boot": here.boot_id.as_str(),
            ":pid": me.pid, ":started": me.started_at,
        },
    )?;
    conn.execute(
        q!("host_serves_prune"),
        named! {
            ":host": here.host_id.as_str(),
            ":secs": 2 * LEASE.as_secs() as i64,
        },
    )?;
    Ok(())
}

/// The serve `me` ends: its row goes.
pub fn serve_ended(conn: &Conn, me: ProcessIdentity) -> Result<()> {
    let here = crate::host::HostIdentity::here();
    conn.execute(
        q!("host_serve_ended"),
        params![
            here.host_id.as_str(),
            here.boot_id.as_str(),
            me.pid,
            me.started_at
        ],
    )?;
    Ok(())
}

columns! {
    /// A host and its lease (`{host_row}` in `sql/host_list.sql`, which groups `host_serves h`
    /// by host; `:secs` is the lease): what [`HostRow`] holds.
    pub mod host_col as "{host_row}" {
        HOST_ID = "h.host_id",
        BOOT_ID = "(SELECT s.boot_id FROM host_serves s WHERE s.host_id = h.host_id ORDER BY s.heartbeat_at DESC LIMIT 1) AS boot_id",
        LAST_HEARTBEAT = "max(h.heartbeat_at) AS last_heartbeat",
        SERVES_UP = "sum(CASE WHEN julianday(h.heartbeat_at) > julianday('now') - :secs / 86400.0 THEN 1 ELSE 0 END) AS serves_up",
        LIVE_THREADS = "(SELECT count(*) FROM threads t WHERE t.status = 'live' AND t.host_id = h.host_id) AS live_threads",
    }
}

/// A host as `host list` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostRow {
    pub host_id: String,
    /// The boot of its newest serve.
    pub boot_id: String,
    /// Its last heartbeat (the database's clock).
    pub last_heartbeat: String,
    /// Its serves whose heartbeat is younger than the lease.
    pub serves_up: i64,
    /// Whether its lease holds (a serve of it beat within [`LEASE`]); when not, it is
    /// unreachable since `last_heartbeat`.
    pub up: bool,
    /// Its live threads (the rows its serves hold).
    pub live_threads: i64,
}

/// Every host that has a serve row, this one among them while it serves, by host id.
pub fn list(conn: &Conn) -> Result<Vec<HostRow>> {
    conn.all(
        q!("host_list", host_col),
        named! {":secs": LEASE.as_secs() as i64},
        |r: &Row<'_>| {
            let serves_up: i64 = r.get(host_col::SERVES_UP)?;
            Ok(HostRow {
                host_id: r.get(host_col::HOST_ID)?,
                boot_id: r.get(host_col::BOOT_ID)?,
                last_heartbeat: r.get(host_col::LAST_HEARTBEAT)?,
                serves_up,
                up: serves_up > 0,
                live_threads: r.get(host_col::LIVE_THREADS)?,
            })
        },
    )
}

/// The live threads of host `host_id` (held by its serves), by id: what `host forget`
/// closes.
pub fn live_threads_of(conn: &Conn, host_id: &str) -> Result<Vec<crate::domain::ThreadId>> {
    conn.all(q!("host_live_threads"), params![host_id], |r| r.get(0))
}

/// Drops every serve row of `host_id` and leaves the managers its serves owned to nobody
/// (after `host forget` closed its threads): a resume of one of their threads is then taken
/// over by the serve that asks.
pub fn forget(conn: &Conn, host_id: &str) -> Result<usize> {
    conn.execute(q!("host_forget_managers"), params![host_id])?;
    conn.execute(q!("host_forget"), params![host_id])
}

/// The lease of the host that holds a thread: the host, its last heartbeat, and whether it
/// is up.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub host_id: String,
    pub last_heartbeat: String,
    pub up: bool,
}

/// The lease of the host that holds `thread_id` (its serve, or its manager's for a row not
/// launched yet); `None` when that host is not recorded (a row from before hosts were) or has
/// no serve row (its serves ended, or predate leases): nothing is known against it.
pub fn lease_of_thread(conn: &Conn, thread_id: &crate::domain::ThreadId) -> Result<Option<Lease>> {
    conn.opt(
        q!("thread_host_lease"),
        named! {":id": thread_id, ":secs": LEASE.as_secs() as i64},
        |r| {
            Ok(Lease {
                host_id: r.get(0)?,
                last_heartbeat: r.get(1)?,
                up: r.get::<i64>(2)? > 0,
            })
        },
    )
}

/// The error for a request that cannot reach the host holding a thread: said at once, nothing
/// written.
pub fn unreachable(thread: &str, action: &str, lease: &Lease) -> crate::error::Error {
    let host = &lease.host_id;
    crate::error::Error::conflict(format!(
        "Thread {thread} is held on host {host}, unreachable since {} (no serve of it renewed its lease within {} s), so the {action} cannot reach it; nothing was done. Repair: wait until host {host} is back (its next serve restores its threads), or run `threadbase host forget {host}` to close its threads as stale.",
        lease.last_heartbeat,
        LEASE.as_secs()
    ))
}
