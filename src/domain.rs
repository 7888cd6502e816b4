//! The values the tables hold, as types: each state column's enum and the two ids.
//!
//! Why: the schema's `CHECK` constraints list each column's words, and the code used to spell
//! them out again as strings. As enums, the compiler checks that every state is handled, a row
//! reads them straight from the column's bytes (no `String` per field; `store/values.rs` holds
//! the conversions, so nothing here knows the database), and a typo cannot compile. This module
//! imports nothing of the crate, so every layer (store, runtime, contract, engine) may use it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An enum stored as one of a fixed set of words (a `TEXT` column with a `CHECK (… IN …)`).
macro_rules! words {
    ($($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $word:literal,)+ })+) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $word)] $variant,)+
        }

        impl $name {
            /// Every value, in the order the schema lists them.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The word the column holds.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }

            /// The value a word names, if it names one.
            pub fn parse(word: &str) -> Option<$name> {
                Self::from_bytes(word.as_bytes())
            }

            fn from_bytes(word: &[u8]) -> Option<$name> {
                $(if word == $word.as_bytes() {
                    return Some($name::$variant);
                })+
                None
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

    )+};
}

words! {
    /// Which public contract a manager serves (`managers.contract`).
    Contract {
        /// A: the pi-threads `thread` tool.
        Thread = "thread",
        /// B: the subagent lifecycle (`agent_*`).
        Agent = "agent",
        /// C: the worker tools (`threads_*`).
        Worker = "worker",
    }

    /// Whether a thread's process may still run (`threads.status`).
    #[derive(Default)]
    ThreadStatus {
        /// A new thread is live.
        #[default]
        Live = "live",
        Closed = "closed",
    }

    /// What a thread is doing (`threads.phase`): the four live phases, the two a closed
    /// thread that did not end cleanly keeps, then `queued` (V16): a live row waiting in the
    /// queue for a slot (THREADBASE_QUEUE=1), with no process yet.
    #[derive(Default)]
    Phase {
        /// A new thread is starting.
        #[default]
        Starting = "starting",
        Busy = "busy",
        Idle = "idle",
        Stopping = "stopping",
        Failed = "failed",
        Stale = "stale",
        Queued = "queued",
    }

    /// What about a thread needs the user (`thread_attention.attention`, V16): the view's one
    /// derivation, in the order it judges them.
    Attention {
        /// Live, and the host that holds it has not beaten within the lease.
        Unreachable = "unreachable",
        /// Live, and the serve that holds it is gone.
        OwnerGone = "owner_gone",
        /// Live with a question waiting for the parent's answer.
        Asking = "asking",
        /// Its last turn ended in an error, or it ended failed.
        Failed = "failed",
        /// Busy with nothing from the child for THREADBASE_STALL_MS.
        Stalled = "stalled",
    }

    /// A contract B lifecycle state (`threads.agent_state`).
    AgentState {
        Starting = "starting",
        Running = "running",
        Completed = "completed",
        Paused = "paused",
        Stopped = "stopped",
        Failed = "failed",
    }

    /// How a closed thread's process ended (`threads.exit_kind`).
    ExitKind {
        /// It exited on its own.
        Exited = "exited",
        /// It was stopped on request.
        Stopped = "stopped",
        /// It could not start, or crashed.
        Failed = "failed",
        /// Its owner died and it was found dead at restore.
        Stale = "stale",
    }

    /// How a worker's last run ended (`threads.outcome`, contract C).
    Outcome {
        Succeeded = "succeeded",
        Failed = "failed",
        Interrupted = "interrupted",
    }

    /// What a `commands` row asks of the serve that holds its thread (`commands.kind`).
    CommandKind {
        /// A graceful stop.
        Stop = "stop",
        /// SIGKILL at once.
        ForceStop = "force_stop",
        /// Contract C: abort the worker's run.
        Interrupt = "interrupt",
        /// Contract A: a prompt or follow-up (the payload holds it).
        Send = "send",
        /// Contract A: relaunch a closed thread (for the serve that manages it).
        Resume = "resume",
        /// Issue 48: bring an isolated thread's worktree into the main tree (the web page's
        /// Merge; the payload holds `{"squash": bool}`), on the worktree's host.
        Merge = "merge",
    }

    /// Where a command stands (`commands.state`).
    CommandState {
        /// Written, not yet claimed by its owner.
        Pending = "pending",
        /// Claimed, being carried out.
        Running = "running",
        Done = "done",
        Failed = "failed",
    }

    /// Where a `mailbox` row stands (`mailbox.state`).
    MailState {
        Pending = "pending",
        Delivered = "delivered",
        Failed = "failed",
    }

    /// Which way a `mailbox` row goes (`mailbox.direction`).
    Direction {
        /// For the thread's process: contract B's steering, contract C's prompt and messages.
        ToChild = "to_child",
        /// For the thread's parent: notices, progress, a worker's report.
        ToParent = "to_parent",
    }

    /// What a `mailbox` row carries (`mailbox.kind`).
    MailKind {
        /// Contract C: a worker's initial prompt.
        Prompt = "prompt",
        /// Contract B: a steering message.
        Steer = "steer",
        /// Contract C: a `threads_send` message.
        FollowUp = "follow_up",
        /// Contract B: a settlement's notice.
        Notice = "notice",
        /// Contract B: an `agent_update` notice.
        Progress = "progress",
        /// Contract C: the coordinator's notice of a report.
        Report = "report",
    }

    /// What a child's dialog asks for (`ui_requests.kind`, THREADBASE_UI=parent).
    QuestionKind {
        /// Yes or no: the answer is `true` or `false`.
        Confirm = "confirm",
        /// One of the question's options.
        Select = "select",
        /// A line of text.
        Input = "input",
        /// A text.
        Editor = "editor",
    }

    /// Where a child's question stands (`ui_requests.state`).
    QuestionState {
        /// Waiting for the parent's answer; the child waits too.
        Pending = "pending",
        /// Answered once (`answer`, `answered_by`).
        Answered = "answered",
        /// Not answered within THREADBASE_UI_TIMEOUT_MS: cancelled as without the setting.
        TimedOut = "timed_out",
        /// The thread's process ended first (a stop, an exit, a restore after a crash).
        Cancelled = "cancelled",
    }
}

impl AgentState {
    /// Starting or running: the thread has a run under way.
    pub fn active(self) -> bool {
        matches!(self, AgentState::Starting | AgentState::Running)
    }
}

impl Attention {
    /// How the state words name it (`live/asking`, `live/owner gone`, `live/host
    /// unreachable`): the view's word, with the spaces the texts always had.
    pub fn word(self) -> &'static str {
        match self {
            Attention::Unreachable => "host unreachable",
            Attention::OwnerGone => "owner gone",
            Attention::Asking => "asking",
            Attention::Failed => "failed",
            Attention::Stalled => "stalled",
        }
    }
}

impl CommandKind {
    /// A stop, graceful or forced.
    pub fn stop(force: bool) -> CommandKind {
        if force {
            CommandKind::ForceStop
        } else {
            CommandKind::Stop
        }
    }
}

/// How a closed thread's process ended (the `exit_*` columns of `threads`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub kind: ExitKind,
    pub code: Option<i64>,
    pub signal: Option<String>,
    pub message: Option<String>,
}

/// A thread's state (the `status`, `phase` and `exit_*` columns of `threads`), each status
/// with what it carries: only a closed thread has an exit, so "live with an exit" does not
/// compile. Contract B's lifecycle (`agent_state`) is its own column beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadState {
    /// Its process may still run, in this phase.
    Live { phase: Phase },
    /// Its process ended: the phase it was left in, and how it ended.
    Closed { phase: Phase, exit: Exit },
}

impl Default for ThreadState {
    fn default() -> Self {
        ThreadState::Live {
            phase: Phase::default(),
        }
    }
}

impl ThreadState {
    /// The state the columns say; `None` for a closed row without an exit kind (the schema's
    /// CHECK refuses one).
    pub fn of_columns(
        status: ThreadStatus,
        phase: Phase,
        kind: Option<ExitKind>,
        code: Option<i64>,
        signal: Option<String>,
        message: Option<String>,
    ) -> Option<ThreadState> {
        Some(match status {
            ThreadStatus::Live => ThreadState::Live { phase },
            ThreadStatus::Closed => ThreadState::Closed {
                phase,
                exit: Exit {
                    kind: kind?,
                    code,
                    signal,
                    message,
                },
            },
        })
    }

    pub fn status(&self) -> ThreadStatus {
        match self {
            ThreadState::Live { .. } => ThreadStatus::Live,
            ThreadState::Closed { .. } => ThreadStatus::Closed,
        }
    }

    pub fn phase(&self) -> Phase {
        match self {
            ThreadState::Live { phase } | ThreadState::Closed { phase, .. } => *phase,
        }
    }

    pub fn exit(&self) -> Option<&Exit> {
        match self {
            ThreadState::Live { .. } => None,
            ThreadState::Closed { exit, .. } => Some(exit),
        }
    }

    pub fn exit_mut(&mut self) -> Option<&mut Exit> {
        match self {
            ThreadState::Live { .. } => None,
            ThreadState::Closed { exit, .. } => Some(exit),
        }
    }
}

/// As the columns: `status`, `phase`, `exit_kind`, `exit_code`, `exit_signal`,
/// `exit_message` (null while live), so `threadbase show --json` keeps their names.
impl Serialize for ThreadState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let exit = self.exit();
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("status", &self.status())?;
        m.serialize_entry("phase", &self.phase())?;
        m.serialize_entry("exit_kind", &exit.map(|x| x.kind))?;
        m.serialize_entry("exit_code", &exit.and_then(|x| x.code))?;
        m.serialize_entry("exit_signal", &exit.and_then(|x| x.signal.as_deref()))?;
        m.serialize_entry("exit_message", &exit.and_then(|x| x.message.as_deref()))?;
        m.end()
    }
}

/// Ids that are text in their column: each binds and compares only as itself (no `Deref`
/// to `str`, no equality with strings); `as_str()` is the one way to its text. `Debug` prints
/// the text as a string's `Debug` does, so logs and messages read as they did with `String`s.
macro_rules! text_id {
    ($($(#[$doc:meta])* $name:ident;)+) => {$(
        $(#[$doc])*
        #[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(id: impl Into<String>) -> $name {
                $name(id.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> $name {
                $name(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> $name {
                $name(id.to_string())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    )+};
}

impl WorkerId {
    /// The worker's thread row's id (the same text).
    pub fn thread_id(&self) -> ThreadId {
        ThreadId::new(self.as_str())
    }

    /// The worker's own Pi session's id (the same text): a worker is a top-level session.
    pub fn session_id(&self) -> SessionId {
        SessionId::new(self.as_str())
    }
}

text_id! {
    /// A thread's id (`threads.id`): `thread_…` for contract A, the contracts' own shapes for
    /// B and C.
    ThreadId;
    /// A Pi session's id (`managers.session_id`, the header `id` of its session file): the
    /// identity of the serve that speaks for it, and of a tree's root session.
    SessionId;
    /// Contract C's `workerID`: `ses_` and a digest of its coordinator and spawn key. A
    /// worker's thread row has it as its id too ([`WorkerId::thread_id`]).
    WorkerId;
}

/// A manager's row id (`managers.id`): one tool contract's view of one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ManagerId(pub i64);

impl ManagerId {
    pub fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for ManagerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A thread's state in words: one spelling for every surface that names it (`tree`, `usage`,
/// `top`, `/threads`, the web page, notices, and contract A's texts, which add ` pid=N` while
/// live). `live/<phase>` while live, or `live/<attention>` when something about it needs the
/// user (issue 45: `live/asking`, `live/failed`, `live/stalled`, `live/owner gone`, `live/host
/// unreachable`; the view `thread_attention` judges, [`Attention::word`] spells); once
/// closed, `closed/failed` for a failed exit or an exit whose code is not 0 (an unknown one
/// included) or that a signal ended (`signalled`), else `closed/<exit kind>`. Saying so writes
/// nothing (a serve's restore pass or `threadbase restore` closes an owner-gone thread as
/// stale).
pub fn state_words(
    status: ThreadStatus,
    phase: Phase,
    exit_kind: Option<ExitKind>,
    exit_code: Option<i64>,
    signalled: bool,
    attention: Option<Attention>,
) -> String {
    match (status, exit_kind) {
        (ThreadStatus::Live, _) => match attention {
            Some(a) => format!("live/{}", a.word()),
            None => format!("live/{}", phase.as_str()),
        },
        (ThreadStatus::Closed, Some(ExitKind::Exited)) if exit_code != Some(0) || signalled => {
            "closed/failed".into()
        }
        (ThreadStatus::Closed, Some(kind)) => format!("closed/{}", kind.as_str()),
        (ThreadStatus::Closed, None) => format!("closed/{}", phase.as_str()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn state_words_spell_each_state_once() {
        use super::{state_words, Attention, ExitKind, Phase, ThreadStatus::*};
        assert_eq!(
            state_words(Live, Phase::Busy, None, None, false, None),
            "live/busy"
        );
        assert_eq!(
            state_words(
                Live,
                Phase::Idle,
                None,
                None,
                false,
                Some(Attention::OwnerGone)
            ),
            "live/owner gone"
        );
        for a in Attention::ALL {
            assert_eq!(
                state_words(Live, Phase::Busy, None, None, false, Some(*a)),
                format!("live/{}", a.word())
            );
        }
        for kind in ExitKind::ALL {
            assert_eq!(
                state_words(Closed, Phase::Idle, Some(*kind), Some(0), false, None),
                format!("closed/{}", kind.as_str())
            );
        }
        // An exit whose code is not 0, unknown included, or that a signal ended.
        for (code, signalled) in [(Some(1), false), (None, false), (Some(0), true)] {
            assert_eq!(
                state_words(
                    Closed,
                    Phase::Idle,
                    Some(ExitKind::Exited),
                    code,
                    signalled,
                    None
                ),
                "closed/failed"
            );
        }
        assert_eq!(
            state_words(Closed, Phase::Stale, None, None, false, None),
            "closed/stale"
        );
    }

    use super::*;

    #[test]
    fn words_match_the_schema() {
        /// The words of the first `CHECK (column IN (…))` in a migration.
        fn listed(migration: &str, column: &str) -> Vec<String> {
            let at = migration
                .find(&format!("CHECK ({column} IN ("))
                .unwrap_or_else(|| panic!("no CHECK for {column}"));
            migration[at..]
                .split("IN (")
                .nth(1)
                .and_then(|l| l.split(')').next())
                .unwrap()
                .split(',')
                .map(|w| w.trim().trim_matches('\'').to_string())
                .collect()
        }
        fn words<T: fmt::Display>(all: &[T]) -> Vec<String> {
            all.iter().map(|v| v.to_string()).collect()
        }
        let v1 = include_str!("../migrations/V1__init.sql");
        // V5 widened `commands`' kinds and states.
        let v5 = include_str!("../migrations/V5__subtree_reach.sql");
        // V12 added the questions of children (`ui_requests`).
        let v12 = include_str!("../migrations/V12__queue_and_questions.sql");
        // V17 widened `commands.kind` with `merge`.
        let v17 = include_str!("../migrations/V17__thread_worktrees.sql");
        // V16 widened `threads.phase` with `queued`.
        let v16 = include_str!("../migrations/V16__thread_attention.sql");
        for (migration, column, want) in [
            (v1, "contract", words(Contract::ALL)),
            (v1, "status", words(ThreadStatus::ALL)),
            (v16, "phase", words(Phase::ALL)),
            (v1, "agent_state", words(AgentState::ALL)),
            (v1, "exit_kind", words(ExitKind::ALL)),
            (v1, "outcome", words(Outcome::ALL)),
            (v1, "direction", words(Direction::ALL)),
            (v1, "state", words(MailState::ALL)),
            (v1, "kind", words(MailKind::ALL)),
            (v17, "kind", words(CommandKind::ALL)),
            (v5, "state", words(CommandState::ALL)),
            (v12, "kind", words(QuestionKind::ALL)),
            (v12, "state", words(QuestionState::ALL)),
        ] {
            assert_eq!(listed(migration, column), want, "{column}");
        }
    }

    #[test]
    fn a_thread_id_reads_as_its_text() {
        let id = ThreadId::from("thread_0123456789ab");
        assert_eq!(id, ThreadId::new("thread_0123456789ab"));
        assert_eq!(id.as_str(), "thread_0123456789ab");
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            "\"thread_0123456789ab\""
        );
        assert_eq!(
            serde_json::to_string(&Phase::Stopping).unwrap(),
            "\"stopping\""
        );
        assert_eq!(Outcome::parse("interrupted"), Some(Outcome::Interrupted));
        assert_eq!(Outcome::parse("Interrupted"), None);
    }
}
