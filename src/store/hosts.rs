//! The hosts that share a database and their leases (issue 33): every serve keeps a row in
//! `host_serves` (its host, boot, pid and start) whose `heartbeat_at` it refreshes every
//! [`HEARTBEAT`] with the database's own clock, not its host's. A host is up while one of its
//! serves' heartbeats is younger than [`LEASE`]; then it is unreachable since its last one.
//! `threadbase host list` shows them; `threadbase host forget ID` closes an unreachable host's
//! threads as stale, on purpose only.

use std::collections::HashMap;
use std::time::Duration;

use crate::domain::ThreadId;
use crate::error::Result;
use crate::identity::ProcessIdentity;
use crate::store::db::{named, params, q, Row};
use crate::store::rows::columns;
use crate::store::{batch_col, Conn, ThreadIds};

/// How long a host stays up after its last heartbeat.
pub const LEASE: Duration = Duration::from_secs(30);
/// How often a serve refreshes its heartbeat.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// Records (or refreshes) the heartbeat of the serve `me` on this host, and drops the rows
/// of this host's serves that stopped beating more than two leases ago (they died without
/// saying so, or belong to an earlier boot). `gap_from` is given on the first heartbeat after
/// some failed (issue 46): when the serve's heartbeats last succeeded before, so that the
/// database's clock records that they resumed now. Returns the heartbeat's time (the
/// database's clock) and whether another host has serve rows
/// ([`crate::Store::note_other_hosts`]). `degraded` is given while the serve's supervision (its
/// row watcher) is not running: since when (the serve's clock) and why; `None` clears it.
pub fn heartbeat(
    conn: &Conn,
    me: ProcessIdentity,
    gap_from: Option<&str>,
    degraded: Option<&Degraded>,
) -> Result<Beat> {
    let here = crate::host::HostIdentity::here();
    let at: String = conn.one(
        q!("host_heartbeat"),
        named! {
            ":host": here.host_id.as_str(), ":boot": here.boot_id.as_str(),
            ":pid": me.pid, ":started": me.started_at,
            ":pid_ns": crate::host::pid_space(), ":gap_from": gap_from,
            ":degraded_since": degraded.map(|d| d.since.as_str()),
            ":degraded_reason": degraded.map(|d| d.reason.as_str()),
        },
        |r| r.get(0),
    )?;
    conn.execute(
        q!("host_serves_prune"),
        named! {
            ":host": here.host_id.as_str(),
            ":secs": 2 * LEASE.as_secs() as i64,
        },
    )?;
    let others: i64 = conn.one(q!("host_others"), params![here.host_id.as_str()], |r| {
        r.get(0)
    })?;
    Ok(Beat {
        at,
        others: others > 0,
    })
}

/// A serve whose supervision (its row watcher: commands, notices, what other processes ask of
/// it) is not running: since when, by its own clock (ISO text, UTC), and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Degraded {
    pub since: String,
    pub reason: String,
}

/// A serve whose last heartbeat said its supervision is not running (`host list`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DegradedServe {
    pub host_id: String,
    pub pid: i64,
    pub since: String,
    pub reason: String,
}

/// The serves whose heartbeat has not lapsed and says their supervision is not running (V21:
/// `host list` opens the database as a writer, which brings it up to date first).
pub fn degraded_serves(conn: &Conn) -> Result<Vec<DegradedServe>> {
    let cutoff = cutoff(conn)?;
    conn.all(
        q!("host_serves_degraded"),
        named! {":cutoff": cutoff.cutoff.as_str()},
        |r| {
            Ok(DegradedServe {
                host_id: r.get(0)?,
                pid: r.get(1)?,
                since: r.get(2)?,
                reason: r.get(3)?,
            })
        },
    )
}

/// What a heartbeat wrote and saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// Its time, by the database's clock.
    pub at: String,
    /// Whether another host has serve rows.
    pub others: bool,
}

/// A serve's heartbeats as the serve sees them (issue 46): when they last succeeded, and
/// whether some failed since, so that the first one to succeed again records the gap.
#[derive(Debug, Default)]
pub struct Heartbeats {
    /// The last successful heartbeat's time (the database's clock).
    last_ok: Option<String>,
    /// Whether a heartbeat failed (or took longer than [`HEARTBEAT`]) since.
    gap: bool,
}

impl Heartbeats {
    /// The `gap_from` the next heartbeat carries: the last success, when heartbeats failed since.
    pub fn gap_from(&self) -> Option<&str> {
        self.last_ok.as_deref().filter(|_| self.gap)
    }

    /// A heartbeat that took `took` succeeded at `at`. Returns whether it took longer than a
    /// heartbeat's period (the database was slow or away while it waited): the caller then
    /// beats again at once, recording the gap.
    pub fn succeeded(&mut self, at: String, took: Duration) -> bool {
        let slow = took > HEARTBEAT && self.gap_from().is_none() && self.last_ok.is_some();
        if slow {
            self.gap = true;
        } else {
            self.gap = false;
            self.last_ok = Some(at);
        }
        slow
    }

    /// A heartbeat failed: the database was unreachable from this serve.
    pub fn failed(&mut self) {
        self.gap = true;
    }
}

/// The lease's cutoff, by the database's clock: a heartbeat at or before `cutoff` (ISO text, as
/// heartbeats are written) has lapsed. While the database came back from an outage less than a
/// lease ago, `outage_until` says when that window ends (issue 46: the view `host_lease`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cutoff {
    pub cutoff: String,
    pub outage_until: Option<String>,
}

/// The lease's cutoff now: the view `host_lease` (V20), or the plain lease on an older
/// database read as it is.
pub fn cutoff(conn: &Conn) -> Result<Cutoff> {
    let read = |r: &Row<'_>| {
        Ok(Cutoff {
            cutoff: r.get(0)?,
            outage_until: r.get(1)?,
        })
    };
    if conn.one(q!("host_lease_schema"), params![], |r| r.get::<i64>(0))? > 0 {
        conn.one(q!("host_lease"), params![], read)
    } else {
        conn.one(
            q!("host_lease_plain"),
            named! {":secs": LEASE.as_secs() as i64},
            read,
        )
    }
}

/// The plain cutoff `secs` seconds before now by the database's clock, in the heartbeats' ISO
/// text (no outage considered): `host forget` asks whether a host's last heartbeat is younger
/// than two leases.
pub fn plain_cutoff(conn: &Conn, secs: u64) -> Result<String> {
    conn.one(q!("host_lease_plain"), named! {":secs": secs as i64}, |r| {
        r.get(0)
    })
}

/// A serve whose heartbeat has not lapsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveServe {
    pub host_id: String,
    pub boot_id: String,
    pub pid: i64,
    pub started_at: i64,
    /// Its PID space (`None`: a serve before V20, taken to be of its host's one PID space).
    pub pid_ns: Option<String>,
    pub heartbeat_at: String,
}

/// Every serve whose heartbeat has not lapsed (the view `host_lease`'s cutoff).
pub fn live_serves(conn: &Conn) -> Result<Vec<LiveServe>> {
    conn.all(q!("host_serves_live"), params![], |r| {
        Ok(LiveServe {
            host_id: r.get(0)?,
            boot_id: r.get(1)?,
            pid: r.get(2)?,
            started_at: r.get(3)?,
            pid_ns: r.get(4)?,
            heartbeat_at: r.get(5)?,
        })
    })
}

impl LiveServe {
    /// Whether this serve runs in this process's PID space on this host and boot, so that its
    /// pid can be looked up here (a row without a PID space is taken to be of its host's one).
    pub fn seen_here(&self) -> bool {
        let here = crate::host::HostIdentity::here();
        self.host_id == here.host_id
            && self.boot_id == here.boot_id
            && match (self.pid_ns.as_deref(), crate::host::pid_space()) {
                (Some(theirs), Some(mine)) => theirs == mine,
                _ => true,
            }
    }

    /// Whether this serve is the process `me`.
    pub fn is(&self, me: ProcessIdentity) -> bool {
        self.seen_here() && self.pid == me.pid && self.started_at == me.started_at
    }

    /// Whether this serve is the owner a row records (its pid, start, host and boot).
    pub fn owns(&self, pid: i64, started_at: i64, host: Option<&str>, boot: Option<&str>) -> bool {
        let here = crate::host::HostIdentity::here();
        self.pid == pid
            && self.started_at == started_at
            && host.unwrap_or(here.host_id.as_str()) == self.host_id
            && boot.unwrap_or(here.boot_id.as_str()) == self.boot_id
    }

    /// Whether this process can see that the serve is gone: it is of this host, boot and PID
    /// space, and its pid and start name no living process. Anything else with a heartbeat that
    /// has not lapsed lives, whatever its host id says.
    pub fn gone_here(&self) -> bool {
        self.seen_here() && !ProcessIdentity::here(self.pid, self.started_at).is_alive()
    }
}

/// Of the serves whose heartbeat has not lapsed, one that holds this host id from another
/// boot or another PID space (issue 46): a cloned machine, or a container sharing the machine
/// id, whose threads this serve would take for its own. `me` is never one.
pub fn collision(serves: &[LiveServe], me: ProcessIdentity) -> Option<&LiveServe> {
    let here = crate::host::HostIdentity::here();
    serves
        .iter()
        .find(|s| s.host_id == here.host_id && !s.is(me) && !s.seen_here())
}

/// The error a serve refuses to start with when [`collision`] found a serve of its host id
/// elsewhere.
pub fn collision_error(other: &LiveServe) -> crate::error::Error {
    let here = crate::host::HostIdentity::here();
    let host = &here.host_id;
    let place = if other.boot_id != here.boot_id {
        format!(
            "another machine (boot {}, this one is {})",
            short(&other.boot_id),
            short(&here.boot_id)
        )
    } else {
        format!(
            "another PID space ({}, this one is {})",
            other.pid_ns.as_deref().unwrap_or("unknown"),
            crate::host::pid_space().unwrap_or("unknown")
        )
    };
    crate::error::Error::conflict(format!(
        "Host id {host} is in use by serve pid {} of {place}, whose last heartbeat at {} is within the lease ({} s): two machines or containers share this host id, and each would take the other's threads for its own. This serve did not start and changed nothing. Repair: set {}=<a name unique to this machine or container> (letters, digits, '.', '-', '_') and start again (or, if that serve is gone, start again once its lease has run out).",
        other.pid,
        other.heartbeat_at,
        LEASE.as_secs(),
        crate::host::HOST_ID_VAR,
    ))
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// The host ids held at once by serves of more than one machine or PID space, with how many
/// of each (`host list`, `check`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Collision {
    pub host_id: String,
    /// Boots among its serves whose heartbeat has not lapsed.
    pub boots: i64,
    /// Boots and PID spaces among them.
    pub spaces: i64,
}

/// Every host id that serves of more than one machine or PID space hold at once (none on a
/// database before V20).
pub fn collisions(conn: &Conn) -> Result<Vec<Collision>> {
    if conn.one(q!("host_lease_schema"), params![], |r| r.get::<i64>(0))? == 0 {
        return Ok(Vec::new());
    }
    conn.all(q!("host_collisions"), params![], |r| {
        Ok(Collision {
            host_id: r.get(0)?,
            boots: r.get(1)?,
            spaces: r.get(2)?,
        })
    })
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
    /// by host; `:cutoff` is the lease's, [`cutoff`]): what [`HostRow`] holds.
    pub mod host_col as "{host_row}" {
        HOST_ID = "h.host_id",
        BOOT_ID = "(SELECT s.boot_id FROM host_serves s WHERE s.host_id = h.host_id ORDER BY s.heartbeat_at DESC LIMIT 1) AS boot_id",
        LAST_HEARTBEAT = "max(h.heartbeat_at) AS last_heartbeat",
        SERVES_UP = "sum(CASE WHEN h.heartbeat_at > :cutoff THEN 1 ELSE 0 END) AS serves_up",
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
    let cutoff = cutoff(conn)?;
    conn.all(
        q!("host_list", host_col),
        named! {":cutoff": cutoff.cutoff.as_str()},
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
    conn.opt(q!("thread_host_lease"), named! {":id": thread_id}, |r| {
        Ok(Lease {
            host_id: r.get(0)?,
            last_heartbeat: r.get(1)?,
            up: r.get::<i64>(2)? > 0,
        })
    })
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

/// What [`Placements::need_of`] reads of a thread's row (the views read their own row types).
pub struct ThreadRowRef<'a> {
    pub id: &'a str,
    pub live: bool,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
    /// The thread's last event, the `since` of an owner this host sees gone, when read.
    pub last_event_at: Option<&'a str>,
}

impl<'a> From<&'a crate::store::threads::ThreadRow> for ThreadRowRef<'a> {
    fn from(t: &'a crate::store::threads::ThreadRow) -> Self {
        ThreadRowRef {
            id: t.id.as_str(),
            live: t.is_live(),
            owner_pid: t.owner_pid,
            owner_started_at: t.owner_started_at,
            last_event_at: Some(&t.last_event_at),
        }
    }
}

/// The hosts' leases as the views judge them, read once per view (`host list`'s query: a
/// handful of rows): where a thread whose row records `host` is held.
#[derive(Debug, Default)]
pub struct Leases {
    here: String,
    /// Each host with a serve row: whether its lease holds, and its last heartbeat.
    by_host: HashMap<String, (bool, String)>,
}

impl Leases {
    pub fn read(conn: &Conn) -> Result<Leases> {
        Ok(Leases {
            here: crate::host::HostIdentity::here().host_id.clone(),
            by_host: list(conn)?
                .into_iter()
                .map(|h| (h.host_id, (h.up, h.last_heartbeat)))
                .collect(),
        })
    }

    /// Since when the host a live thread's row records (`host`) is unreachable: its last
    /// heartbeat, when its lease ran out. `live` says whether the row is live (a closed thread
    /// is never unreachable: nothing is left to reach); nothing recorded is this host's.
    pub fn unreachable_since(&self, host: Option<&str>, live: bool) -> Option<&str> {
        match self.by_host.get(host?) {
            Some((false, since)) if live => Some(since),
            _ => None,
        }
    }

    /// Whether a thread whose row records `host` is held on this host, reachable (nothing
    /// recorded: a row from before hosts were, a database before V13).
    pub fn here(&self, host: Option<&str>, live: bool) -> bool {
        host.is_none_or(|h| !self.is_other(h)) && self.unreachable_since(host, live).is_none()
    }

    /// Whether a host other than this one has a serve row.
    pub fn others(&self) -> bool {
        self.by_host.keys().any(|h| *h != self.here)
    }

    /// Whether `host` is another host than this one.
    pub fn is_other(&self, host: &str) -> bool {
        host != self.here
    }
}

/// The hosts of a database's threads, for the read-only views (`tree`, `list`, `top`,
/// `usage`): each thread's host and each host's lease, in two queries (one on a database
/// before V14, which records no hosts: every thread is then this host's).
#[derive(Debug, Default)]
pub struct Placements {
    /// Each thread's host, by thread id.
    held: HashMap<String, String>,
    leases: Leases,
    /// What needs the user about each thread that needs anything (issue 45, the view
    /// `thread_attention`), by thread id.
    needs: HashMap<String, crate::store::attention::Need>,
}

impl Placements {
    /// Every thread's host.
    pub fn read(conn: &Conn) -> Result<Placements> {
        Placements::read_of(conn, None)
    }

    /// Thread `id`'s host alone (`threadbase show`).
    pub fn read_one(conn: &Conn, id: &ThreadId) -> Result<Placements> {
        Placements::read_of(conn, Some(id))
    }

    fn read_of(conn: &Conn, one: Option<&ThreadId>) -> Result<Placements> {
        let needs = match one {
            None => crate::store::attention::all(conn)?
                .into_iter()
                .map(|(id, n)| (id.into_string(), n))
                .collect(),
            Some(id) => crate::store::attention::of_thread_checked(conn, id)?
                .map(|n| (id.as_str().to_string(), n))
                .into_iter()
                .collect(),
        };
        if conn.one(q!("hosts_recorded"), params![], |r| r.get::<i64>(0))? == 0 {
            return Ok(Placements {
                held: HashMap::new(),
                leases: Leases {
                    here: crate::host::HostIdentity::here().host_id.clone(),
                    by_host: HashMap::new(),
                },
                needs,
            });
        }
        let read = |r: &Row<'_>| Ok((r.get(0)?, r.get(1)?));
        let held = match one {
            None => conn.all(q!("thread_hosts"), params![], read)?,
            Some(id) => conn.all(q!("thread_host"), params![id], read)?,
        };
        Ok(Placements {
            held: held.into_iter().collect(),
            leases: Leases::read(conn)?,
            needs,
        })
    }

    /// What needs the user about thread `t` (issue 45): the view's word, seen from this host
    /// ([`crate::store::attention::seen_here`]): a live thread held here whose serve's pid is
    /// gone is `owner_gone` at once.
    pub fn need_of(&self, t: &ThreadRowRef<'_>) -> Option<crate::store::attention::Need> {
        let here = self.leases.here(self.host_of(t.id), t.live);
        let owner_gone = here
            && t.live
            && t.owner_started_at.is_some()
            && crate::identity::Owner::recorded(t.owner_pid, t.owner_started_at, None, None)
                .is_some_and(|owner| !owner.is_alive());
        crate::store::attention::seen_here(
            self.needs.get(t.id).cloned(),
            owner_gone,
            t.owner_pid,
            t.last_event_at,
        )
    }

    /// Whether the views show hosts: the database knows a host other than this one (a thread
    /// held there, or a serve of it). A database one host uses reads as it always did.
    pub fn team(&self) -> bool {
        self.held.values().any(|h| self.leases.is_other(h)) || self.leases.others()
    }

    /// The host that holds (or held) thread `id`, when recorded.
    pub fn host_of(&self, id: &str) -> Option<&str> {
        self.held.get(id).map(String::as_str)
    }

    /// Since when the host that holds thread `id` is unreachable ([`Leases::unreachable_since`]).
    pub fn unreachable_since(&self, id: &str, live: bool) -> Option<&str> {
        self.leases.unreachable_since(self.host_of(id), live)
    }
}

columns! {
    /// A live thread's host whose lease ran out (`{unreachable_row}` in
    /// `sql/threads_unreachable.sql`, after the batch's `{batch_row}`; it reads `host_serves h`
    /// grouped by host): what [`Unreachable`] holds.
    pub mod unreachable_col as "{unreachable_row}" {
        HOST_ID = "h.host_id",
        SINCE = "max(h.heartbeat_at) AS last_heartbeat",
    }
}

/// A live thread's host whose lease ran out: the host and since when (its last heartbeat).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unreachable {
    pub host_id: String,
    pub since: String,
}

/// Of `ids` (a poll's one, a list's batch), in their order: the host and since when, for the
/// live ones held on a host whose lease ran out; `None` for the others. One query.
pub fn unreachable_of(conn: &Conn, ids: &ThreadIds) -> Result<Vec<Option<Unreachable>>> {
    let mut out = vec![None; ids.len()];
    conn.each(
        q!("threads_unreachable", batch_col, unreachable_col),
        params![ids],
        |r| {
            let at: usize = r.get(batch_col::AT)?;
            if let Some(slot) = out.get_mut(at) {
                *slot = Some(Unreachable {
                    host_id: r.get(batch_col::COUNT + unreachable_col::HOST_ID)?,
                    since: r.get(batch_col::COUNT + unreachable_col::SINCE)?,
                });
            }
            Ok(())
        },
    )?;
    Ok(out)
}
