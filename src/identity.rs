//! A process's identity and who holds what a row records, in the ground floor. A pid alone
//! is not an identity (pids are reused), so it is paired with the process's start time from
//! `/proc/<pid>/stat` ([`ProcessIdentity`]: a process of this host and boot). A row records
//! its owner with the host and boot it lives on ([`Owner`]: a pid means something only on its
//! own host and boot, issue 33). Every layer that asks "who holds this thread, and is it still
//! alive?" (the store's check, the engine, the runtime's restore, the CLI) asks [`holder`]
//! and gets a [`Holder`]; signals stay in `runtime::signals`.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// A process of this host and boot, as the kernel knows it: pid plus start time in clock
/// ticks since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub pid: i64,
    pub started_at: i64,
}

/// The process a row records as its owner (its `…_pid`, `…_started_at`, `…_host` and `…_boot`
/// columns), placed by its host and boot: a row of another host with this serve's pid and
/// start time is not this serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub pid: i64,
    /// -1 when unknown: it matches no living process.
    pub started_at: i64,
    /// The host it lives on, when another than this one: nothing here can tell whether it
    /// lives, and nothing here acts on it.
    pub other_host: Option<&'static str>,
    /// Recorded under an earlier boot of this host: gone, whatever now has its pid.
    pub earlier_boot: bool,
}

/// Who holds what a row records (a thread, a manager, a worker, a subagent run), seen from one
/// process: the one answer every layer uses ([`holder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// This serve.
    Here,
    /// Another serve: a living one of this host and boot, or one of another host, whatever
    /// its lease (nothing here can tell whether it lives; its host's lease is judged where a
    /// command is handed to it, `engine::remote::request`). Its commands go through the table.
    Elsewhere(Owner),
    /// Nobody: none recorded, or the recorded process is gone (dead, its pid reused, or of an
    /// earlier boot).
    Gone,
}

/// Who holds what a row records as its `owner`, seen from the serve `me`: the one rule for
/// every contract (a thread's holder, a manager's owner, a worker's, a subagent run's, a
/// session an adoption would take from, the restore pass's "owner gone").
pub fn holder(owner: Option<Owner>, me: ProcessIdentity) -> Holder {
    let Some(owner) = owner else {
        return Holder::Gone;
    };
    if owner.other_host.is_some() {
        return Holder::Elsewhere(owner);
    }
    match owner.here() {
        Some(p) if p == me => Holder::Here,
        Some(p) if p.is_alive() => Holder::Elsewhere(owner),
        _ => Holder::Gone,
    }
}

impl Holder {
    /// The other serve that holds it ([`Holder::Elsewhere`]): the one its commands go to.
    pub fn elsewhere(&self) -> Option<Owner> {
        match self {
            Holder::Elsewhere(owner) => Some(*owner),
            Holder::Here | Holder::Gone => None,
        }
    }
}

impl ProcessIdentity {
    /// This process.
    pub fn current() -> ProcessIdentity {
        let pid = std::process::id() as i64;
        ProcessIdentity {
            pid,
            started_at: start_time(pid).unwrap_or(0),
        }
    }

    /// A process of this host and boot (one this process started, or read from `/proc`).
    pub fn here(pid: i64, started_at: i64) -> ProcessIdentity {
        ProcessIdentity { pid, started_at }
    }

    /// True when a process with this pid exists, is not a zombie, and started at the same
    /// moment (so it is the same process, not a reused pid).
    pub fn is_alive(&self) -> bool {
        matches!(stat(self.pid), Some(s) if s.start_time == self.started_at && s.state != 'Z' && s.state != 'X')
    }
}

impl Owner {
    /// The process a row records: none without a pid; an unknown start time (-1) matches no
    /// living process; `host`/`boot` `None` (a row written before hosts were recorded) is this
    /// host's.
    pub fn recorded(
        pid: Option<i64>,
        started_at: Option<i64>,
        host: Option<&str>,
        boot: Option<&str>,
    ) -> Option<Owner> {
        Owner::recorded_on(
            crate::host::HostIdentity::here(),
            pid,
            started_at,
            host,
            boot,
        )
    }

    /// [`Owner::recorded`], seen from host `here`.
    fn recorded_on(
        here: &crate::host::HostIdentity,
        pid: Option<i64>,
        started_at: Option<i64>,
        host: Option<&str>,
        boot: Option<&str>,
    ) -> Option<Owner> {
        pid.map(|pid| Owner {
            pid,
            started_at: started_at.unwrap_or(-1),
            other_host: host.filter(|h| *h != here.host_id).map(intern),
            earlier_boot: host.is_some_and(|h| h == here.host_id)
                && boot.is_some_and(|b| b != here.boot_id),
        })
    }

    /// The process of this host and boot it names (`None`: it is of another host or an
    /// earlier boot, so its pid names nothing here).
    pub fn here(&self) -> Option<ProcessIdentity> {
        (self.other_host.is_none() && !self.earlier_boot)
            .then(|| ProcessIdentity::here(self.pid, self.started_at))
    }

    /// True when the process may live: of this host and boot, it is alive; of an earlier boot,
    /// it is gone; of another host, it cannot be looked up from here and counts as living, so
    /// that nothing here closes its rows or signals its pid (that is its own host's to do).
    pub fn is_alive(&self) -> bool {
        match self.here() {
            Some(p) => p.is_alive(),
            None => self.other_host.is_some(),
        }
    }
}

impl From<ProcessIdentity> for Owner {
    /// A process of this host and boot, as a row records it.
    fn from(p: ProcessIdentity) -> Owner {
        Owner {
            pid: p.pid,
            started_at: p.started_at,
            other_host: None,
            earlier_boot: false,
        }
    }
}

/// Another host's id, kept for the process's life: the hosts that share a database are a
/// handful, so an [`Owner`] stays `Copy`.
fn intern(host: &str) -> &'static str {
    static HOSTS: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut hosts = HOSTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(h) = hosts.get(host) {
        return h;
    }
    let h: &'static str = Box::leak(host.to_string().into_boxed_str());
    hosts.insert(h);
    h
}

pub(crate) struct Stat {
    pub(crate) state: char,
    pub(crate) start_time: i64,
    pub(crate) pgrp: i64,
}

pub(crate) fn stat(pid: i64) -> Option<Stat> {
    if pid <= 0 {
        return None;
    }
    let text =
        std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")).ok()?;
    // The command name is in parentheses and may hold spaces or ')'; fields follow the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) pgrp(5) ... starttime(22); index = field - 3.
    Some(Stat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The start time of `pid` in clock ticks since boot, if it exists.
pub fn start_time(pid: i64) -> Option<i64> {
    stat(pid).map(|s| s.start_time)
}

/// The process group of `pid`, if it exists.
pub fn process_group(pid: i64) -> Option<i64> {
    stat(pid).map(|s| s.pgrp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::HostIdentity;

    #[test]
    fn a_row_is_placed_by_its_host_and_boot() {
        let me = HostIdentity::read(Some("a"), None, Some("boot-1")).unwrap();
        let at = |host, boot| Owner::recorded_on(&me, Some(1), Some(2), host, boot).unwrap();
        let here = |o: Owner| (o.other_host, o.earlier_boot);
        assert_eq!(here(at(None, None)), (None, false));
        assert_eq!(here(at(Some("a"), Some("boot-1"))), (None, false));
        assert_eq!(here(at(Some("a"), None)), (None, false));
        assert_eq!(here(at(Some("a"), Some("boot-0"))), (None, true));
        assert_eq!(here(at(Some("b"), Some("boot-1"))), (Some("b"), false));
        assert_eq!(here(at(Some("b"), None)), (Some("b"), false));
        assert!(at(Some("a"), Some("boot-0")).here().is_none());
        assert!(at(Some("b"), None).here().is_none() && at(Some("b"), None).is_alive());
    }

    #[test]
    fn a_recorded_process_is_placed_by_its_host_and_boot() {
        let me = ProcessIdentity::current();
        let here = HostIdentity::here();
        let (host, boot) = (Some(here.host_id.as_str()), Some(here.boot_id.as_str()));
        // This serve, recorded on this host and boot (or before hosts were recorded): it.
        let mine = Owner::recorded(Some(me.pid), Some(me.started_at), host, boot);
        assert_eq!(mine, Some(Owner::from(me)));
        assert_eq!(holder(mine, me), Holder::Here);
        let legacy = Owner::recorded(Some(me.pid), Some(me.started_at), None, None);
        assert_eq!(legacy, Some(Owner::from(me)));
        // Another living process of this host and boot (the test's parent): held elsewhere.
        let parent = i64::from(std::os::unix::process::parent_id());
        let theirs = Owner::recorded(Some(parent), start_time(parent), host, boot).unwrap();
        assert_eq!(holder(Some(theirs), me), Holder::Elsewhere(theirs));
        // The same pid and start on another host: not this serve, and alive as far as this
        // host can tell (nothing here acts on it), so held elsewhere.
        let other =
            Owner::recorded(Some(me.pid), Some(me.started_at), Some("elsewhere"), boot).unwrap();
        assert_eq!(other.other_host, Some("elsewhere"));
        assert_ne!(other, Owner::from(me));
        assert!(other.is_alive() && other.here().is_none());
        assert_eq!(holder(Some(other), me), Holder::Elsewhere(other));
        // The same pid and start on an earlier boot of this host: gone.
        let earlier =
            Owner::recorded(Some(me.pid), Some(me.started_at), host, Some("old")).unwrap();
        assert!(earlier.earlier_boot);
        assert!(!earlier.is_alive());
        assert_eq!(holder(Some(earlier), me), Holder::Gone);
    }
}
