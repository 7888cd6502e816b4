//! Process-group signals, and what is left of a process's group: with [`crate::identity`]
//! (a process's identity, pid plus start time from `/proc/<pid>/stat`, re-exported here) the
//! only code that talks to the OS about processes. A group is never signalled when its id is
//! ≤ 1.

use crate::identity::stat;
pub use crate::identity::{process_group, start_time, ProcessIdentity};

/// Which signal to send to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupSignal {
    Terminate,
    Kill,
}

/// Signals every process in group `pgid`. Refuses `pgid <= 1` (that would reach init or
/// every process) and returns false when the group no longer exists.
pub fn signal_group(pgid: i64, sig: GroupSignal) -> bool {
    if pgid <= 1 || pgid > i32::MAX as i64 {
        return false;
    }
    let Some(pid) = rustix::process::Pid::from_raw(pgid as i32) else {
        return false;
    };
    let signal = match sig {
        GroupSignal::Terminate => rustix::process::Signal::TERM,
        GroupSignal::Kill => rustix::process::Signal::KILL,
    };
    rustix::process::kill_process_group(pid, signal).is_ok()
}

/// True when any process (zombies excluded) still belongs to group `pgid`.
pub fn group_has_members(pgid: i64) -> bool {
    if pgid <= 1 {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i64>().ok())).any(|pid| {
        matches!(stat(pid), Some(s) if s.pgrp == pgid && s.state != 'Z' && s.state != 'X')
    })
}

/// Kills the group of a recorded child only when the recorded pid is still the same process
/// (pid and start time match) and still leads that group. Returns true when it signalled.
pub fn kill_recorded_group(pid: i64, pgid: i64, started_at: Option<i64>) -> bool {
    let Some(started_at) = started_at else {
        return false;
    };
    if !ProcessIdentity::here(pid, started_at).is_alive() {
        return false;
    }
    if process_group(pid) != Some(pgid) {
        return false;
    }
    signal_group(pgid, GroupSignal::Kill)
}

/// The environment variables that name the thread a child process works for (contract A/B
/// children: `PI_THREADS_SELF_ID`; contract C workers: `THREADBASE_WORKER_ID`). Every process a
/// child starts inherits them.
pub const THREAD_ENV: [&str; 2] = ["PI_THREADS_SELF_ID", "THREADBASE_WORKER_ID"];

/// A thread whose recorded process is gone, and the group it ran in (`None`: never recorded).
#[derive(Debug, Clone, Copy)]
pub struct GoneThread<'a> {
    pub thread_id: &'a crate::domain::ThreadId,
    pub pgid: Option<i64>,
}

/// Kills the leftovers of threads whose recorded process is gone: live processes whose
/// environment names one of the threads (see [`THREAD_ENV`]) and that are in its group (any
/// group when the group was never recorded). The environment proves each one is the thread's,
/// so a reused pid or group id is never hit. One pass over `/proc` for all of them, then another
/// as long as the last one signalled a process not signalled before: a leftover may start a
/// process after the pass listed `/proc` and before its SIGKILL landed (a child still starting
/// when its serve died, `crash_serve`'s rounds), and a killed process starts no more. Returns,
/// per thread, whether something was signalled.
pub fn kill_thread_leftovers(threads: &[GoneThread<'_>]) -> Vec<bool> {
    let mut killed = vec![false; threads.len()];
    // Each thread's `KEY=id` for every key of THREAD_ENV, with the thread's index.
    let wanted: Vec<(usize, Vec<u8>)> = threads
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.thread_id.as_str().is_empty())
        .flat_map(|(i, t)| {
            THREAD_ENV
                .iter()
                .map(move |k| (i, format!("{k}={}", t.thread_id).into_bytes()))
        })
        .collect();
    if wanted.is_empty() {
        return killed;
    }
    let mut signalled = std::collections::HashSet::new();
    // Bounded all the same: each pass must find a process the last ones did not.
    for _ in 0..100 {
        if !kill_pass(threads, &wanted, &mut killed, &mut signalled) {
            break;
        }
    }
    killed
}

/// One pass over `/proc` for [`kill_thread_leftovers`]: whether it signalled a process that
/// is not in `signalled` (which it extends).
fn kill_pass(
    threads: &[GoneThread<'_>],
    wanted: &[(usize, Vec<u8>)],
    killed: &mut [bool],
    signalled: &mut std::collections::HashSet<i64>,
) -> bool {
    let mut new = false;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    let me = std::process::id() as i64;
    for pid in dir
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i64>().ok()))
    {
        if pid == me {
            continue;
        }
        let Some(s) = stat(pid) else { continue };
        if s.state == 'Z' || s.state == 'X' {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let owner = environ.split(|b| *b == 0).find_map(|kv| {
            wanted
                .iter()
                .find(|(i, needle)| {
                    kv == needle.as_slice() && threads[*i].pgid.is_none_or(|g| g == s.pgrp)
                })
                .map(|(i, _)| *i)
        });
        let Some(i) = owner else { continue };
        let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
            continue;
        };
        if rustix::process::kill_process(p, rustix::process::Signal::KILL).is_ok() {
            killed[i] = true;
            new |= signalled.insert(pid);
        }
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The live (not zombie) processes whose environment holds `needle` (`KEY=value`).
    fn carrying(needle: &str) -> Vec<i64> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i64>().ok()))
            .filter(|&pid| matches!(stat(pid), Some(s) if s.state != 'Z' && s.state != 'X'))
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
            })
            .collect()
    }

    /// A leftover that keeps starting processes (a child still starting when its serve died)
    /// starts some after a pass listed `/proc` and before its SIGKILL lands: the passes go on
    /// until one finds nothing new, so none of them is left.
    #[test]
    fn leftovers_started_while_the_pass_runs_are_killed_too() {
        use std::os::unix::process::CommandExt;
        let id = crate::domain::ThreadId::new(format!("thread_fork{}", std::process::id()));
        let needle = format!("PI_THREADS_SELF_ID={id}");
        let mut forker = std::process::Command::new("sh")
            .args(["-c", "while :; do sleep 1000 & done"])
            .env("PI_THREADS_SELF_ID", id.as_str())
            .process_group(0)
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        while carrying(&needle).len() < 20 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let group = i64::from(forker.id());
        let killed = kill_thread_leftovers(&[GoneThread {
            thread_id: &id,
            pgid: None,
        }]);
        forker.wait().unwrap();
        assert_eq!(killed, [true]);
        // SIGKILLed processes end at once; their parent gone, init reaps them.
        let mut left = carrying(&needle);
        for _ in 0..100 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            left = carrying(&needle);
        }
        // The test's own group: nothing is left behind even when it fails.
        signal_group(group, GroupSignal::Kill);
        assert!(left.is_empty(), "left running: {left:?}");
    }

    #[test]
    fn identity_of_this_process() {
        let me = ProcessIdentity::current();
        assert!(me.started_at > 0);
        assert!(me.is_alive());
        assert!(!ProcessIdentity::here(me.pid, me.started_at + 1).is_alive());
        assert!(!ProcessIdentity::here(0, 0).is_alive());
    }

    #[test]
    fn never_signals_low_groups() {
        assert!(!signal_group(0, GroupSignal::Kill));
        assert!(!signal_group(1, GroupSignal::Kill));
        assert!(!signal_group(-5, GroupSignal::Kill));
    }
}
