//! A process's identity, in the ground floor: a pid alone is not an identity (pids are reused),
//! so it is paired with the process's start time from `/proc/<pid>/stat`, and with where it
//! lives ([`Place`]: a pid means something only on its own host and boot, issue 33). Every
//! layer that asks
//! "is the process a row records still alive?" (the store's check, the engine's holders, the
//! runtime's restore, the CLI) uses this one type; signals stay in `runtime::process`.

use std::path::Path;

pub use crate::host::Place;

/// A process as the kernel knows it: pid plus start time in clock ticks since boot, and where
/// it lives. Two identities are equal only on the same place: a row of another host with this
/// serve's pid and start time is not this serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub pid: i64,
    pub started_at: i64,
    pub place: Place,
}

/// Who holds the process a row records, seen from one serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// This serve.
    Me,
    /// Another living serve.
    Elsewhere(ProcessIdentity),
    /// Nobody: none recorded, or the recorded process is gone (its pid reused or dead).
    Gone,
}

impl ProcessIdentity {
    /// This process.
    pub fn current() -> ProcessIdentity {
        let pid = std::process::id() as i64;
        ProcessIdentity {
            pid,
            started_at: start_time(pid).unwrap_or(0),
            place: Place::Here,
        }
    }

    /// A process of this host and boot (one this process started, or read from `/proc`).
    pub fn here(pid: i64, started_at: i64) -> ProcessIdentity {
        ProcessIdentity {
            pid,
            started_at,
            place: Place::Here,
        }
    }

    /// The process a row records (its `…_pid`, `…_started_at`, `…_host` and `…_boot`
    /// columns): none without a pid; an unknown start time (-1) matches no living process.
    pub fn recorded(
        pid: Option<i64>,
        started_at: Option<i64>,
        host: Option<&str>,
        boot: Option<&str>,
    ) -> Option<ProcessIdentity> {
        pid.map(|pid| ProcessIdentity {
            pid,
            started_at: started_at.unwrap_or(-1),
            place: crate::host::HostIdentity::here().place(host, boot),
        })
    }

    /// Who holds what a row records, seen from the serve `me`: the one rule for every contract
    /// (a thread's holder, a manager's owner, a worker's, a subagent run's, a session an
    /// adoption would take from, the restore pass's "owner gone").
    pub fn holder(recorded: Option<ProcessIdentity>, me: ProcessIdentity) -> Holder {
        match recorded {
            Some(o) if o == me => Holder::Me,
            Some(o) if o.is_alive() => Holder::Elsewhere(o),
            _ => Holder::Gone,
        }
    }

    /// The serve a row records, when it is a living process other than `me`: "held by another
    /// live serve" ([`ProcessIdentity::holder`]).
    pub fn held_elsewhere(
        recorded: Option<ProcessIdentity>,
        me: ProcessIdentity,
    ) -> Option<ProcessIdentity> {
        match ProcessIdentity::holder(recorded, me) {
            Holder::Elsewhere(o) => Some(o),
            Holder::Me | Holder::Gone => None,
        }
    }

    /// True when a process with this pid exists, is not a zombie, and started at the same
    /// moment (so it is the same process, not a reused pid). A process of an earlier boot is
    /// gone. One of another host cannot be looked up from here and counts as living, so that
    /// nothing here closes its rows or signals its pid: that is its own host's to do.
    pub fn is_alive(&self) -> bool {
        match self.place {
            Place::Here => {
                matches!(stat(self.pid), Some(s) if s.start_time == self.started_at && s.state != 'Z' && s.state != 'X')
            }
            Place::EarlierBoot => false,
            Place::OtherHost => true,
        }
    }

    /// Whether this process can be signalled from here: it is of this host and boot.
    pub fn is_here(&self) -> bool {
        self.place == Place::Here
    }
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
