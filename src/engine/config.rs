//! One serve's configuration: where it sits in the tree and every setting of the three
//! contracts, read from the environment once, when `serve` starts (`threadbase serve` builds
//! it; the demo writes one out). The engine and its contracts read only this: none of them
//! looks at the environment on its own, so one serve's settings cannot change under it.

use crate::domain::{SessionId, ThreadId};
use std::path::PathBuf;
use std::time::Duration;

use super::budget::Budget;
use crate::contract::worker as contract_c;
use crate::runtime::RuntimeConfig;

/// Contract A's `PI_THREADS_MAX_DEPTH` and `PI_THREADS_MAX_THREADS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_depth: i64,
    pub max_threads: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 2,
            max_threads: 8,
        }
    }
}

/// Contract B's limits (settings: `PI_SUBAGENTS_MAX_LEVELS`, `PI_SUBAGENTS_MAX_THREADS`,
/// `PI_SUBAGENTS_MAX_CONCURRENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentLimits {
    pub max_levels: usize,
    pub max_threads: i64,
    pub max_concurrent: i64,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_levels: 3,
            max_threads: 64,
            max_concurrent: 16,
        }
    }
}

/// Every setting a serve reads from the environment, with its default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Contract A's limits.
    pub limits: Limits,
    /// Contract A's idle cleanup and live timeout.
    pub timers: RuntimeConfig,
    /// Contract B's limits.
    pub agent_limits: AgentLimits,
    /// Contract C's `THREADBASE_MAX_WORKERS` (1..32, default 4): live workers per coordinator.
    pub max_workers: i64,
    /// `THREADBASE_NOTICES` (default on; `off` turns it off): contract A's notices of a
    /// thread that settled, failed, was stopped by another or closed as stale reach the caller.
    pub notices: bool,
    /// `THREADBASE_TEST_TIMEOUT_DIVISOR` (tests only; default 1): contract B's report-only
    /// timers fire after `timeoutMs / divisor`, so a test need not wait 30 s. The notice still
    /// reports `timeoutMs`; the validated range is unchanged.
    pub agent_timeout_divisor: u64,
    /// `THREADBASE_QUEUE=1` (default off): a start over the live limit is queued instead of
    /// refused, and launched in order as slots free (issue 30).
    pub queue: bool,
    /// `THREADBASE_QUEUE_IDLE_MS` (default 0): with the queue on, a live thread idle this long
    /// yields its slot to a row waiting in the queue (closed as idle cleanup closes it, so it
    /// stays resumable), the longest idle first.
    pub queue_idle: Duration,
    /// `THREADBASE_UI=parent` (default off): a child's dialogs wait for the parent's answer,
    /// at most this long (`THREADBASE_UI_TIMEOUT_MS`, default 5 minutes); `None`: they are
    /// cancelled at once, as the originals do.
    pub ui_parent: Option<Duration>,
    /// `THREADBASE_ISOLATION=worktree` (default off, issue 48): every new thread whose cwd is
    /// inside a git work tree runs in a git worktree of its own (`crate::worktree`).
    pub isolation: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            limits: Limits::default(),
            timers: RuntimeConfig::default(),
            agent_limits: AgentLimits::default(),
            max_workers: contract_c::DEFAULT_MAX_WORKERS,
            notices: true,
            agent_timeout_divisor: 1,
            queue: false,
            queue_idle: Duration::ZERO,
            ui_parent: None,
            isolation: false,
        }
    }
}

impl Settings {
    /// Reads every setting through `get` (an unset or empty variable is `None`); an invalid
    /// value keeps its default and says so once through `warn` (the originals' texts).
    pub fn from_env(get: &dyn Fn(&str) -> Option<String>, warn: &mut dyn FnMut(String)) -> Self {
        let d = Settings::default();
        let mut read =
            |name: &str, default: u64| env_integer(name, get(name).as_deref(), default, warn);
        let limits = Limits {
            max_depth: read("PI_THREADS_MAX_DEPTH", d.limits.max_depth as u64) as i64,
            max_threads: read("PI_THREADS_MAX_THREADS", d.limits.max_threads as u64) as i64,
        };
        let ms = |n: u64| (n > 0).then(|| Duration::from_millis(n));
        let timers = RuntimeConfig {
            idle_cleanup: ms(read("PI_THREADS_IDLE_CLEANUP_MS", 0)),
            live_timeout: ms(read("PI_THREADS_LIVE_TIMEOUT_MS", 0)),
            stall: ms(read("THREADBASE_STALL_MS", 0)),
            inactivity_timeout: ms(read("THREADBASE_INACTIVITY_TIMEOUT_MS", 0)),
        };
        let b = d.agent_limits;
        let agent_limits = AgentLimits {
            max_levels: read("PI_SUBAGENTS_MAX_LEVELS", b.max_levels as u64).clamp(1, 32) as usize,
            max_threads: read("PI_SUBAGENTS_MAX_THREADS", b.max_threads as u64) as i64,
            max_concurrent: read("PI_SUBAGENTS_MAX_CONCURRENT", b.max_concurrent as u64) as i64,
        };
        let agent_timeout_divisor = read("THREADBASE_TEST_TIMEOUT_DIVISOR", 1).max(1);
        let ui_timeout = read("THREADBASE_UI_TIMEOUT_MS", DEFAULT_UI_TIMEOUT_MS).max(1);
        let max_workers = max_workers_from(get("THREADBASE_MAX_WORKERS").as_deref(), warn);
        let notices = notices_from(get("THREADBASE_NOTICES").as_deref(), warn);
        let queue = queue_from(get("THREADBASE_QUEUE").as_deref(), warn);
        let queue_idle = queue_idle_from(get("THREADBASE_QUEUE_IDLE_MS").as_deref(), warn);
        let isolation = isolation_from(get("THREADBASE_ISOLATION").as_deref(), warn);
        let ui_parent = ui_from(get("THREADBASE_UI").as_deref(), warn)
            .then(|| Duration::from_millis(ui_timeout));
        Settings {
            limits,
            timers,
            agent_limits,
            max_workers,
            notices,
            agent_timeout_divisor,
            queue,
            queue_idle,
            ui_parent,
            isolation,
        }
    }
}

/// Everything a `serve` knows about the session it manages.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The parent Pi session file, if it has one.
    pub session_file: Option<PathBuf>,
    /// The manager's identity: the parent session id.
    pub session_id: SessionId,
    /// The parent's cwd.
    pub cwd: PathBuf,
    /// The caller's own thread path (`/root` for a top-level Pi).
    pub scope_path: String,
    /// The caller's depth (0 for a top-level Pi).
    pub depth: i64,
    /// The caller's own thread id when it is itself a managed child.
    pub self_id: Option<ThreadId>,
    /// The caller's parent path and id when it is a managed child.
    pub parent_path: Option<String>,
    pub parent_id: Option<ThreadId>,
    /// The root Pi session of the whole tree.
    pub root_session_id: SessionId,
    /// The parent Pi's argv, for flag inheritance.
    pub parent_args: Vec<String>,
    /// The parent project is trusted: children inside its cwd get `--approve`.
    pub trusted: bool,
    /// How much of a result goes on the pipe (`--wire`).
    pub wire: crate::contract::Wire,
    /// `--report-usage`: each answer is preceded by a `usage` notification with the spend
    /// below this session not reported yet (see `engine::spend`).
    pub report_usage: bool,
    /// `--report-status`: the row watcher sends a `status` notification with the tree's
    /// threads by condition and its spend whenever they change (`store::status`,
    /// `contract::status`); never for a managed child's serve (its tree's status is its root
    /// session's to show).
    pub report_status: bool,
    /// The argv prefix that launches a child Pi.
    pub pi_command: Vec<String>,
    /// Pi's agent dir (sessions live below it when the parent has no session file).
    pub agent_dir: PathBuf,
    /// The database file (passed to children).
    pub db: PathBuf,
    /// The limits and timers of the three contracts.
    pub settings: Settings,
    /// `THREADBASE_BUDGET_TOKENS` / `THREADBASE_BUDGET_USD`: caps on the root's whole tree.
    pub budget: Budget,
    /// Contract B's 0.19 settings (`threadbase-agents.json`, global then a trusted project's),
    /// read once at serve's start.
    pub agent_settings: std::sync::Arc<crate::contract::agent_settings::AgentSettings>,
}

/// Reads a non-negative integer setting: trimmed text matching `^\d+$` within the safe
/// integer range, else the default with one warning (the reference's text).
pub fn env_integer(
    name: &str,
    value: Option<&str>,
    default: u64,
    warn: &mut dyn FnMut(String),
) -> u64 {
    let Some(raw) = value else { return default };
    let t = raw.trim();
    let ok = !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    match t.parse::<u64>() {
        Ok(n) if ok && n <= 9_007_199_254_740_991 => n,
        _ => {
            warn(format!(
                "[pi-threads] Ignoring invalid {name}={} (expected a non-negative integer); using default.",
                crate::paths::json_quote(raw)
            ));
            default
        }
    }
}

/// `THREADBASE_UI_TIMEOUT_MS`'s default: five minutes.
pub const DEFAULT_UI_TIMEOUT_MS: u64 = 5 * 60 * 1000;

/// `THREADBASE_QUEUE`: `1` (or `on`, `true`, `yes`) turns the queue on; unset, `0`, `off`
/// leave it off; anything else leaves it off and warns once.
fn queue_from(value: Option<&str>, warn: &mut dyn FnMut(String)) -> bool {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return false;
    };
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => true,
        "0" | "off" | "false" | "no" => false,
        _ => {
            warn(format!(
                "THREADBASE_QUEUE={v:?} is neither 1 nor 0; the queue stays off. Repair: set THREADBASE_QUEUE=1 to queue starts over the live limit, or unset it."
            ));
            false
        }
    }
}

/// `THREADBASE_QUEUE_IDLE_MS`: a whole number of milliseconds (default 0); anything else keeps
/// 0 and warns once.
fn queue_idle_from(value: Option<&str>, warn: &mut dyn FnMut(String)) -> Duration {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Duration::ZERO;
    };
    match v.parse::<u64>() {
        Ok(ms) if v.bytes().all(|b| b.is_ascii_digit()) && ms <= 9_007_199_254_740_991 => {
            Duration::from_millis(ms)
        }
        _ => {
            warn(format!(
                "THREADBASE_QUEUE_IDLE_MS={v:?} is not a whole number of milliseconds; an idle thread yields its slot to a queued one at once (0). Repair: set THREADBASE_QUEUE_IDLE_MS to how long a thread may stay idle before it yields its slot (say 60000), or unset it."
            ));
            Duration::ZERO
        }
    }
}

/// `THREADBASE_ISOLATION`: `worktree` puts each new thread in a git worktree of its own;
/// unset, `off` or `none` leaves them in their parent's directory; anything else warns once.
fn isolation_from(value: Option<&str>, warn: &mut dyn FnMut(String)) -> bool {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return false;
    };
    match v.to_ascii_lowercase().as_str() {
        "worktree" => true,
        "off" | "none" => false,
        _ => {
            warn(format!(
                "THREADBASE_ISOLATION={v:?} is not `worktree`; threads run in their parent's directory. Repair: set THREADBASE_ISOLATION=worktree to give each new thread a git worktree of its own, or unset it."
            ));
            false
        }
    }
}

/// `THREADBASE_UI`: `parent` sends a child's dialogs to its parent; unset or `cancel` cancels
/// them at once; anything else cancels them and warns once.
fn ui_from(value: Option<&str>, warn: &mut dyn FnMut(String)) -> bool {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return false;
    };
    match v.to_ascii_lowercase().as_str() {
        "parent" => true,
        "cancel" | "off" => false,
        _ => {
            warn(format!(
                "THREADBASE_UI={v:?} is not \"parent\"; a child's dialogs are cancelled at once. Repair: set THREADBASE_UI=parent to have them wait for the parent's answer, or unset it."
            ));
            false
        }
    }
}

/// `THREADBASE_MAX_WORKERS`: an integer from 1 to 32, else the default with one warning.
/// `THREADBASE_NOTICES`: `off` (or `0`, `false`, `no`) turns contract A's notices off; `on`
/// (or `1`, `true`, `yes`) or unset keeps them; anything else keeps them and warns once.
fn notices_from(value: Option<&str>, warn: &mut dyn FnMut(String)) -> bool {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return true;
    };
    match v.to_ascii_lowercase().as_str() {
        "off" | "0" | "false" | "no" => false,
        "on" | "1" | "true" | "yes" => true,
        _ => {
            warn(format!(
                "THREADBASE_NOTICES={v:?} is neither on nor off; notices stay on. Repair: set THREADBASE_NOTICES=off to turn them off, or unset it."
            ));
            true
        }
    }
}

fn max_workers_from(value: Option<&str>, warn: &mut dyn FnMut(String)) -> i64 {
    let Some(raw) = value.filter(|v| !v.is_empty()) else {
        return contract_c::DEFAULT_MAX_WORKERS;
    };
    let (lo, hi) = contract_c::MAX_WORKERS_RANGE;
    let t = raw.trim();
    match t.parse::<i64>() {
        Ok(n) if t.bytes().all(|b| b.is_ascii_digit()) && (lo..=hi).contains(&n) => n,
        _ => {
            warn(format!(
                "[threadbase] Ignoring invalid THREADBASE_MAX_WORKERS={} (expected an integer from {lo} to {hi}); using default {}.",
                crate::paths::json_quote(raw),
                contract_c::DEFAULT_MAX_WORKERS
            ));
            contract_c::DEFAULT_MAX_WORKERS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_workers_setting() {
        let mut warnings = Vec::new();
        let mut warn = |w: String| warnings.push(w);
        assert_eq!(max_workers_from(None, &mut warn), 4);
        assert_eq!(max_workers_from(Some(""), &mut warn), 4);
        assert_eq!(max_workers_from(Some("1"), &mut warn), 1);
        assert_eq!(max_workers_from(Some(" 32 "), &mut warn), 32);
        assert_eq!(max_workers_from(Some("0"), &mut warn), 4);
        assert_eq!(max_workers_from(Some("33"), &mut warn), 4);
        assert_eq!(max_workers_from(Some("-1"), &mut warn), 4);
        assert_eq!(max_workers_from(Some("2.5"), &mut warn), 4);
        assert_eq!(warnings.len(), 4);
        assert!(warnings[0].contains("THREADBASE_MAX_WORKERS=\"0\""));
    }

    #[test]
    fn the_queue_and_parent_questions_are_off_unless_asked_for() {
        let mut warnings = Vec::new();
        let mut warn = |w: String| warnings.push(w);
        assert!(!queue_from(None, &mut warn));
        assert!(queue_from(Some("1"), &mut warn));
        assert!(queue_from(Some(" on "), &mut warn));
        assert!(!queue_from(Some("0"), &mut warn));
        assert!(!queue_from(Some("later"), &mut warn));
        assert!(!ui_from(None, &mut warn));
        assert!(ui_from(Some("parent"), &mut warn));
        assert!(!ui_from(Some("cancel"), &mut warn));
        assert!(!ui_from(Some("child"), &mut warn));
        assert_eq!(queue_idle_from(None, &mut warn), Duration::ZERO);
        assert_eq!(
            queue_idle_from(Some(" 60000 "), &mut warn),
            Duration::from_millis(60_000)
        );
        assert_eq!(queue_idle_from(Some("0"), &mut warn), Duration::ZERO);
        assert_eq!(queue_idle_from(Some("-5"), &mut warn), Duration::ZERO);
        assert_eq!(queue_idle_from(Some("1m"), &mut warn), Duration::ZERO);
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(warnings[3].contains("THREADBASE_QUEUE_IDLE_MS=\"1m\""));
        assert!(
            warnings.iter().all(|w| w.contains("Repair:")),
            "{warnings:?}"
        );
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let s = Settings::from_env(&env(&[]), &mut |_| {});
        assert_eq!((s.queue, s.ui_parent), (false, None));
        assert_eq!(s.queue_idle, Duration::ZERO);
        let s = Settings::from_env(&env(&[("THREADBASE_QUEUE_IDLE_MS", "250")]), &mut |_| {});
        assert_eq!(s.queue_idle, Duration::from_millis(250));
        let s = Settings::from_env(
            &env(&[("THREADBASE_QUEUE", "1"), ("THREADBASE_UI", "parent")]),
            &mut |_| {},
        );
        assert_eq!(
            (s.queue, s.ui_parent),
            (true, Some(Duration::from_millis(DEFAULT_UI_TIMEOUT_MS)))
        );
        let s = Settings::from_env(
            &env(&[
                ("THREADBASE_UI", "parent"),
                ("THREADBASE_UI_TIMEOUT_MS", "250"),
            ]),
            &mut |_| {},
        );
        assert_eq!(s.ui_parent, Some(Duration::from_millis(250)));
    }

    #[test]
    fn isolation_is_off_unless_worktree() {
        let mut warnings = Vec::new();
        let mut warn = |w: String| warnings.push(w);
        assert!(!isolation_from(None, &mut warn));
        assert!(isolation_from(Some(" worktree "), &mut warn));
        assert!(isolation_from(Some("WORKTREE"), &mut warn));
        assert!(!isolation_from(Some("off"), &mut warn));
        assert!(!isolation_from(Some("container"), &mut warn));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("THREADBASE_ISOLATION=\"container\""));
        assert!(warnings[0].contains("Repair:"));
    }

    #[test]
    fn notices_are_on_unless_turned_off() {
        let mut warnings = Vec::new();
        let mut warn = |w: String| warnings.push(w);
        assert!(notices_from(None, &mut warn));
        assert!(notices_from(Some(""), &mut warn));
        assert!(notices_from(Some("on"), &mut warn));
        assert!(!notices_from(Some("off"), &mut warn));
        assert!(!notices_from(Some(" OFF "), &mut warn));
        assert!(!notices_from(Some("0"), &mut warn));
        assert!(notices_from(Some("sometimes"), &mut warn));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("THREADBASE_NOTICES=\"sometimes\""));
        assert!(warnings[0].contains("Repair:"));
    }

    /// Every contract's settings come from one read of the environment: the values set, the
    /// defaults for the rest, one warning per invalid value.
    #[test]
    fn one_read_covers_every_contract() {
        let vars = [
            ("PI_THREADS_MAX_DEPTH", "3"),
            ("PI_THREADS_IDLE_CLEANUP_MS", "250"),
            ("PI_SUBAGENTS_MAX_LEVELS", "99"),
            ("PI_SUBAGENTS_MAX_CONCURRENT", "x"),
            ("THREADBASE_MAX_WORKERS", "2"),
        ];
        let get = |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        let mut warnings = Vec::new();
        let s = Settings::from_env(&get, &mut |w| warnings.push(w));
        assert_eq!(
            s.limits,
            Limits {
                max_depth: 3,
                max_threads: 8
            }
        );
        assert_eq!(s.timers.idle_cleanup, Some(Duration::from_millis(250)));
        assert_eq!(s.timers.live_timeout, None);
        assert_eq!(
            s.agent_limits,
            AgentLimits {
                max_levels: 32,
                max_threads: 64,
                max_concurrent: 16
            }
        );
        assert_eq!(s.max_workers, 2);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("PI_SUBAGENTS_MAX_CONCURRENT=\"x\""));
        assert_eq!(
            Settings::from_env(&|_| None, &mut |_| {}),
            Settings::default()
        );
    }
}
