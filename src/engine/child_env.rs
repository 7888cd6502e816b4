//! The environment a child Pi is launched with, so that its own extension's `serve` knows
//! its place in the tree (`PI_THREADS_*`), the database (`THREADBASE_DB`) and the settings it
//! inherits. One builder for the three contracts: each says where its child sits (path,
//! depth, parent, root session) and which settings pass on, and nothing else differs.

use super::config::{AgentLimits, Settings};
use super::ServeConfig;
use crate::domain::{SessionId, ThreadId, WorkerId};

/// The child's parent, as its serve reads it.
pub(super) enum Parent<'a> {
    /// A thread at `path`; `id` is its thread id when it has one (`None` leaves
    /// `PI_THREADS_PARENT_ID` to what this process has).
    Thread {
        path: &'a str,
        id: Option<&'a ThreadId>,
    },
    /// None: the child is a top-level session (contract C's workers). Empty values unset what
    /// this process's own environment carries.
    TopLevel,
}

/// A child's environment, built up by what it inherits.
pub(super) struct ChildEnv(Vec<(String, String)>);

impl ChildEnv {
    /// The database and the child's own place: thread `id` (`None`: it is not a managed
    /// thread, so the variable is unset) at `path` and `depth`, under `parent`, in the tree of
    /// `root_session`.
    pub(super) fn new(
        cfg: &ServeConfig,
        id: Option<&ThreadId>,
        path: &str,
        depth: i64,
        parent: Parent<'_>,
        root_session: &SessionId,
    ) -> ChildEnv {
        let mut env = ChildEnv(Vec::with_capacity(16));
        env.set("THREADBASE_DB", cfg.db.display().to_string());
        env.set("PI_THREADS_PATH", path);
        env.set("PI_THREADS_DEPTH", depth.to_string());
        env.set(
            "PI_THREADS_SELF_ID",
            id.map(ThreadId::as_str).unwrap_or_default(),
        );
        match parent {
            Parent::Thread { path, id } => {
                env.set("PI_THREADS_PARENT_PATH", path);
                if let Some(id) = id {
                    env.set("PI_THREADS_PARENT_ID", id.as_str());
                    env.set("PI_THREADS_PARENT_THREAD_ID", id.as_str());
                }
            }
            Parent::TopLevel => {
                for k in [
                    "PI_THREADS_PARENT_PATH",
                    "PI_THREADS_PARENT_ID",
                    "PI_THREADS_PARENT_THREAD_ID",
                ] {
                    env.set(k, "");
                }
            }
        }
        env.set("PI_THREADS_ROOT_SESSION_ID", root_session.as_str());
        env
    }

    /// Contract A's limits and timers, which a child's own `thread` tool keeps.
    pub(super) fn thread_settings(mut self, s: &Settings) -> ChildEnv {
        let ms = |d: Option<std::time::Duration>| d.map_or(0, |d| d.as_millis() as u64);
        self.set("PI_THREADS_MAX_DEPTH", s.limits.max_depth.to_string());
        self.set("PI_THREADS_MAX_THREADS", s.limits.max_threads.to_string());
        self.set(
            "PI_THREADS_IDLE_CLEANUP_MS",
            ms(s.timers.idle_cleanup).to_string(),
        );
        self.set(
            "PI_THREADS_LIVE_TIMEOUT_MS",
            ms(s.timers.live_timeout).to_string(),
        );
        self
    }

    /// Contract B's limits, which hold across the whole agent tree.
    pub(super) fn agent_limits(mut self, l: &AgentLimits) -> ChildEnv {
        self.set("PI_SUBAGENTS_MAX_LEVELS", l.max_levels.to_string());
        self.set("PI_SUBAGENTS_MAX_THREADS", l.max_threads.to_string());
        self.set("PI_SUBAGENTS_MAX_CONCURRENT", l.max_concurrent.to_string());
        self
    }

    /// Contract C: the worker's and its coordinator's ids.
    pub(super) fn worker(mut self, id: &WorkerId, coordinator: &SessionId) -> ChildEnv {
        self.set("THREADBASE_WORKER_ID", id.as_str());
        self.set("THREADBASE_COORDINATOR_ID", coordinator.as_str());
        self
    }

    fn set(&mut self, key: &str, value: impl Into<String>) {
        self.0.push((key.to_string(), value.into()));
    }

    pub(super) fn into_vec(self) -> Vec<(String, String)> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cfg() -> ServeConfig {
        ServeConfig {
            session_file: None,
            session_id: "ses_parent".into(),
            cwd: "/w".into(),
            scope_path: "/root".into(),
            depth: 0,
            self_id: None,
            parent_path: None,
            parent_id: None,
            root_session_id: "ses_root".into(),
            parent_args: vec![],
            trusted: false,
            wire: Default::default(),
            report_usage: false,
            report_status: false,
            pi_command: vec!["pi".into()],
            agent_dir: "/a".into(),
            db: "/d/t.sqlite".into(),
            settings: Settings::default(),
            budget: Default::default(),
            agent_settings: Default::default(),
        }
    }

    fn map(env: ChildEnv) -> BTreeMap<String, String> {
        let v = env.into_vec();
        let m: BTreeMap<_, _> = v.iter().cloned().collect();
        assert_eq!(m.len(), v.len(), "no variable is set twice: {v:?}");
        m
    }

    #[test]
    fn a_thread_child_knows_its_place_and_contract_a_settings() {
        let env = map(ChildEnv::new(
            &cfg(),
            Some(&ThreadId::new("thread_0123456789ab")),
            "/root/a/b",
            2,
            Parent::Thread {
                path: "/root/a",
                id: Some(&ThreadId::new("thread_aaaaaaaaaaaa")),
            },
            &SessionId::new("ses_root"),
        )
        .thread_settings(&Settings::default()));
        let want: BTreeMap<String, String> = [
            ("THREADBASE_DB", "/d/t.sqlite"),
            ("PI_THREADS_PATH", "/root/a/b"),
            ("PI_THREADS_DEPTH", "2"),
            ("PI_THREADS_SELF_ID", "thread_0123456789ab"),
            ("PI_THREADS_PARENT_PATH", "/root/a"),
            ("PI_THREADS_PARENT_ID", "thread_aaaaaaaaaaaa"),
            ("PI_THREADS_PARENT_THREAD_ID", "thread_aaaaaaaaaaaa"),
            ("PI_THREADS_ROOT_SESSION_ID", "ses_root"),
            ("PI_THREADS_MAX_DEPTH", "2"),
            ("PI_THREADS_MAX_THREADS", "8"),
            ("PI_THREADS_IDLE_CLEANUP_MS", "0"),
            ("PI_THREADS_LIVE_TIMEOUT_MS", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env, want);
    }

    #[test]
    fn a_parent_without_an_id_leaves_the_parent_id_alone() {
        let env = map(ChildEnv::new(
            &cfg(),
            Some(&ThreadId::new("t")),
            "/root/x",
            1,
            Parent::Thread {
                path: "/root",
                id: None,
            },
            &SessionId::new("r"),
        ));
        assert!(!env.contains_key("PI_THREADS_PARENT_ID"));
        assert!(!env.contains_key("PI_THREADS_PARENT_THREAD_ID"));
    }

    #[test]
    fn a_worker_is_a_top_level_session_of_its_own() {
        let env = map(ChildEnv::new(
            &cfg(),
            None,
            "/root",
            0,
            Parent::TopLevel,
            &SessionId::new("w1"),
        )
        .thread_settings(&Settings::default())
        .worker(&WorkerId::new("w1"), &SessionId::new("ses_coord")));
        for k in [
            "PI_THREADS_SELF_ID",
            "PI_THREADS_PARENT_PATH",
            "PI_THREADS_PARENT_ID",
            "PI_THREADS_PARENT_THREAD_ID",
        ] {
            assert_eq!(env[k], "", "{k}");
        }
        assert_eq!(env["PI_THREADS_ROOT_SESSION_ID"], "w1");
        assert_eq!(env["THREADBASE_WORKER_ID"], "w1");
        assert_eq!(env["THREADBASE_COORDINATOR_ID"], "ses_coord");
        assert_eq!(env["PI_THREADS_DEPTH"], "0");
    }

    #[test]
    fn an_agent_child_carries_contract_b_limits() {
        let env = map(ChildEnv::new(
            &cfg(),
            Some(&ThreadId::new("ag")),
            "/root/fix",
            1,
            Parent::Thread {
                path: "/root",
                id: None,
            },
            &SessionId::new("ses_root"),
        )
        .agent_limits(&AgentLimits::default()));
        assert_eq!(env["PI_SUBAGENTS_MAX_LEVELS"], "3");
        assert_eq!(env["PI_SUBAGENTS_MAX_THREADS"], "64");
        assert_eq!(env["PI_SUBAGENTS_MAX_CONCURRENT"], "16");
        assert!(!env.contains_key("PI_THREADS_MAX_DEPTH"));
    }
}
