//! Which machine, and which boot of it, a serve runs on (issue 33). A pid, a process group and
//! a start time mean something only on the machine that recorded them, and only until it
//! reboots: every row that records a process also records the host it lives on, and a serve
//! acts (signals, restores, closes as stale) only on rows of its own host and boot.
//!
//! A host is one PID space: processes that share a host id must see each other's pids. Two
//! containers of one machine that share its machine id (a bind-mounted `/etc/machine-id`) but
//! not its PID namespace are two hosts, and each needs a `THREADBASE_HOST_ID` of its own.
//!
//! The host id is `THREADBASE_HOST_ID` when set (two hosts in one machine's tests, or a name a
//! team chooses), else the machine id (`/etc/machine-id`, as systemd writes it), else, on a
//! machine without one (a container image often has none), the kernel's host name. The boot id
//! is the kernel's (`/proc/sys/kernel/random/boot_id`), new at every boot.
//!
//! A row written before hosts were recorded (no host in it) is this host's: such a database
//! had only one.

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The environment variable that names this host instead of its machine id.
pub const HOST_ID_VAR: &str = "THREADBASE_HOST_ID";
/// For tests only: a boot id to use instead of the kernel's, so that one machine can play a
/// cloned one (same host id, another boot: issue 46). Never set it outside tests.
pub const TEST_BOOT_ID_VAR: &str = "THREADBASE_TEST_BOOT_ID";
/// Where this process's PID namespace is named.
const PID_NS: &str = "/proc/self/ns/pid";
/// Where the machine id is read.
const MACHINE_ID: &str = "/etc/machine-id";
/// Where the boot id is read.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
/// Where the host name is read, when there is no machine id.
const HOSTNAME: &str = "/proc/sys/kernel/hostname";
/// A host id's longest form (a machine id is 32 hex digits).
const MAX_LEN: usize = 64;

/// A host and its current boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostIdentity {
    /// `THREADBASE_HOST_ID`, or the machine id.
    pub host_id: String,
    /// The kernel's boot id: a row recorded under another boot names processes that are gone.
    pub boot_id: String,
}

impl HostIdentity {
    /// This host, read once per process.
    pub fn current() -> Result<&'static HostIdentity> {
        static CURRENT: OnceLock<std::result::Result<HostIdentity, String>> = OnceLock::new();
        CURRENT
            .get_or_init(|| {
                let named = std::env::var(HOST_ID_VAR).ok().filter(|n| !n.is_empty());
                let machine_id = std::fs::read_to_string(MACHINE_ID)
                    .ok()
                    .filter(|m| !m.trim().is_empty())
                    .or_else(|| {
                        std::fs::read_to_string(HOSTNAME)
                            .ok()
                            .map(|h| format!("hostname:{}", h.trim()))
                    });
                HostIdentity::read(
                    named.as_deref(),
                    machine_id.as_deref(),
                    boot_id().as_deref(),
                )
                .map_err(|e| e.message)
            })
            .as_ref()
            .map_err(|m| Error::invalid(m.clone()))
    }

    /// This host, or what stands for it when [`HostIdentity::current`] fails (a bad
    /// `THREADBASE_HOST_ID`, which every command refuses at its start: `cli::run`): the
    /// variable as given.
    pub fn here() -> &'static HostIdentity {
        static FALLBACK: OnceLock<HostIdentity> = OnceLock::new();
        HostIdentity::current().unwrap_or_else(|_| {
            FALLBACK.get_or_init(|| HostIdentity {
                host_id: std::env::var(HOST_ID_VAR).unwrap_or_default(),
                boot_id: boot_id().map(|b| b.trim().to_string()).unwrap_or_default(),
            })
        })
    }

    /// The identity from its sources: `named` (`THREADBASE_HOST_ID`) before the machine id's
    /// text, and the boot id's text.
    pub fn read(
        named: Option<&str>,
        machine_id: Option<&str>,
        boot_id: Option<&str>,
    ) -> Result<HostIdentity> {
        let host_id = match named.map(str::trim) {
            Some(name) => {
                check_name(name)?;
                name.to_string()
            }
            None => match machine_id.map(str::trim) {
                Some(id) if !id.is_empty() => id.to_string(),
                _ => {
                    return Err(Error::invalid(format!(
                        "This machine has no machine id ({MACHINE_ID} is missing or empty), so threadbase cannot tell its processes from another host's. Repair: set {HOST_ID_VAR} to a name for this host (letters, digits, '.', '-', '_'; unique in the team's database), or run `systemd-machine-id-setup`."
                    )))
                }
            },
        };
        let boot_id = match boot_id.map(str::trim) {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => {
                return Err(Error::invalid(format!(
                    "The kernel gave no boot id ({BOOT_ID}), so threadbase cannot tell a recorded process from one of an earlier boot. Repair: run threadbase on Linux with /proc mounted."
                )))
            }
        };
        Ok(HostIdentity { host_id, boot_id })
    }
}

/// The kernel's boot id, or [`TEST_BOOT_ID_VAR`] in a test.
fn boot_id() -> Option<String> {
    std::env::var(TEST_BOOT_ID_VAR)
        .ok()
        .filter(|b| !b.is_empty())
        .or_else(|| std::fs::read_to_string(BOOT_ID).ok())
}

/// This process's PID space (`pid:[4026531836]`, read once): a pid names a process only in its
/// own PID namespace, so a serve row of this host and boot from another PID space is not one
/// this process can look up (issue 46). `None` where `/proc` does not say.
pub fn pid_space() -> Option<&'static str> {
    static SPACE: OnceLock<Option<String>> = OnceLock::new();
    SPACE
        .get_or_init(|| {
            std::fs::read_link(PID_NS)
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        })
        .as_deref()
}

/// A `THREADBASE_HOST_ID` is shown in `host list`, `tree` and `top` and stored in rows: a
/// short name of plain characters.
fn check_name(name: &str) -> Result<()> {
    let plain = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if name.is_empty() || name.len() > MAX_LEN || !plain {
        return Err(Error::invalid(format!(
            "{HOST_ID_VAR}={name:?} is not a host name threadbase can use. Repair: set it to 1 to {MAX_LEN} letters, digits, '.', '-' or '_', unique in the team's database, or unset it to use the machine id."
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACHINE: &str = "3d1219c7c4c5404aaa1f6d2a48adfda4\n";
    const BOOT: &str = "cc1e58bc-56b5-4abf-88b5-c807ec1a5711\n";

    #[test]
    fn the_machine_id_names_the_host_unless_the_variable_does() {
        let h = HostIdentity::read(None, Some(MACHINE), Some(BOOT)).unwrap();
        assert_eq!(h.host_id, "3d1219c7c4c5404aaa1f6d2a48adfda4");
        assert_eq!(h.boot_id, "cc1e58bc-56b5-4abf-88b5-c807ec1a5711");
        let h = HostIdentity::read(Some("laptop-1"), Some(MACHINE), Some(BOOT)).unwrap();
        assert_eq!(h.host_id, "laptop-1");
    }

    #[test]
    fn a_bad_name_or_a_missing_source_is_refused_with_a_repair() {
        for bad in ["", "a b", "host/1", &"x".repeat(65)] {
            let e = HostIdentity::read(Some(bad), Some(MACHINE), Some(BOOT)).unwrap_err();
            assert!(e.message.contains("Repair:"), "{bad:?}: {}", e.message);
        }
        let e = HostIdentity::read(None, None, Some(BOOT)).unwrap_err();
        assert!(e.message.contains(HOST_ID_VAR), "{}", e.message);
        let e = HostIdentity::read(None, Some(" \n"), Some(BOOT)).unwrap_err();
        assert!(e.message.contains("machine id"), "{}", e.message);
        let e = HostIdentity::read(None, Some(MACHINE), None).unwrap_err();
        assert!(e.message.contains("boot id"), "{}", e.message);
    }

    #[test]
    fn this_machine_has_an_identity() {
        let h = HostIdentity::current().unwrap();
        assert!(!h.host_id.is_empty() && !h.boot_id.is_empty());
        assert!(pid_space().is_some_and(|s| s.starts_with("pid:[")));
    }
}
