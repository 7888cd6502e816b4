//! The `threadbase` command line: one module per group of subcommands.

mod adopt;
mod answer;
mod budget;
mod check;
mod demo;
mod forest;
mod host;
pub mod http;
mod inspect;
mod launch;
mod logging;
pub mod pi;
mod reap;
mod select;
mod serve;
mod sql;
pub mod stop;
mod top;
pub use top::spends as top_spends;
pub use top::states as top_states;
pub mod usage;
mod web;
mod worktree;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::error::Error;

#[derive(Debug, Parser)]
#[command(
    name = "threadbase",
    version,
    about = "SQL-backed state engine for trees of background Pi agent sessions"
)]
pub struct Cli {
    /// The database: a SQLite file, or a team's PostgreSQL database as a URL
    /// (postgres://USER[:PASSWORD]@HOST[:PORT]/DB). Default: $THREADBASE_DB, else
    /// $PI_CODING_AGENT_DIR/threadbase.sqlite, else ~/.pi/agent/threadbase.sqlite.
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The main job on an embedded default: a temporary database and scripted agents, a small
    /// tree started, sent to, waited on, stopped, resumed, forked and archived, then printed.
    Demo {
        /// Keep the demo database at this path instead of a temporary file.
        #[arg(long, value_name = "PATH")]
        keep: Option<PathBuf>,
    },
    /// The JSON-lines server for one Pi session (started by the Pi extension).
    Serve(serve::ServeArgs),
    /// List stored threads: one table per root Pi session (newest session first), each in
    /// tree order.
    List {
        /// all, live or closed.
        #[arg(long, default_value = "all")]
        state: String,
        /// active, archived or all.
        #[arg(long, default_value = "all")]
        visibility: String,
        #[command(flatten)]
        trees: TreeArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print each root session's whole tree, newest session first: its own threads and,
    /// nested under each child, the threads the child's own serve started, indented, with
    /// state and exit kind.
    Tree {
        #[command(flatten)]
        trees: TreeArgs,
        /// Print JSON instead of the indented tree.
        #[arg(long)]
        json: bool,
    },
    /// Show one thread: a thread id, a canonical path, or a task name.
    Show {
        /// A thread id, a canonical path (/root/task), or a task name.
        reference: String,
        /// Only threads of the manager with this session id (older and narrower than
        /// --session: one serve's threads, not its whole session tree).
        #[arg(long, value_name = "SESSION_ID")]
        manager: Option<String>,
        /// Only one Pi session's threads: its session id (a root session's, or a child's own
        /// serve's; a unique prefix of 8+ characters will do), its name, or `latest` (the
        /// session with the most recent thread activity).
        #[arg(long, value_name = "ID|NAME|latest", conflicts_with = "manager")]
        session: Option<String>,
        /// Print JSON instead of aligned fields.
        #[arg(long)]
        json: bool,
    },
    /// Print a thread's retained events, oldest first (with --match: of every matching thread).
    Events {
        /// A thread id, a canonical path (/root/task), or a task name.
        #[arg(required_unless_present = "matching")]
        reference: Option<String>,
        /// Only threads of the manager with this session id (older and narrower than
        /// --session: one serve's threads, not its whole session tree).
        #[arg(long, value_name = "SESSION_ID")]
        manager: Option<String>,
        /// Only one Pi session's threads: its session id (a root session's, or a child's own
        /// serve's; a unique prefix of 8+ characters will do), its name, or `latest` (the
        /// session with the most recent thread activity).
        #[arg(long, value_name = "ID|NAME|latest", conflicts_with = "manager")]
        session: Option<String>,
        /// The events of every thread whose path matches this glob, instead of one REFERENCE.
        #[arg(long = "match", value_name = "GLOB", conflicts_with = "reference")]
        matching: Option<String>,
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Register the bundled Pi extension with Pi (as `pi install <dir>` does), or remove it, so
    /// a plain `pi` session offers the `thread` tool with no `-e` and no variables.
    Pi {
        #[command(subcommand)]
        action: PiAction,
    },
    /// The hosts that share this database (their serves, leases and live threads), and
    /// forgetting one that went away.
    Host {
        #[command(subcommand)]
        action: HostAction,
    },
    /// The budgets kept in the database, which every serve of every host applies (issue 33):
    /// `tree` caps each root session's whole tree (as THREADBASE_BUDGET_TOKENS/_USD do),
    /// `team` the whole database's spend, `thread` each thread (as
    /// THREADBASE_THREAD_BUDGET_*/THREADBASE_THREAD_MAX_TURNS do). Without an action, shows
    /// them and what was spent.
    Budget {
        #[command(subcommand)]
        action: Option<BudgetAction>,
        /// Print {"team": {...}|null, "tree": {...}|null, "thread": {...}|null, "teamSpend": {...}, "env": {...}}.
        #[arg(long)]
        json: bool,
    },
    /// Stop every live thread whose path matches a glob (e.g. '/root/api_*'; `*` stays inside
    /// one path segment, `**` crosses them; a pattern without a leading `/` matches at any
    /// depth). The owning serves carry the stops out; prints what was stopped.
    Stop {
        /// One or more globs over canonical thread paths.
        #[arg(required = true, value_name = "PATTERN")]
        patterns: Vec<String>,
        /// SIGKILL the process groups at once instead of a graceful stop.
        #[arg(long)]
        force: bool,
        /// Only threads of the manager with this session id.
        #[arg(long, value_name = "SESSION_ID")]
        manager: Option<String>,
        /// How long to wait for the owning serves to report each thread closed.
        #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
        timeout: f64,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Tokens and cost per thread and per subtree: the whole tree of every root session
    /// (across every manager in it, newest session first), or with REF that thread's subtree. The budget line comes
    /// from THREADBASE_BUDGET_TOKENS / THREADBASE_BUDGET_USD when set.
    Usage {
        /// A thread id, a canonical path, or a task name (default: every tree).
        reference: Option<String>,
        /// Resolve REF among the threads of the manager with this session id (older and
        /// narrower than --session).
        #[arg(long, value_name = "SESSION_ID")]
        manager: Option<String>,
        /// Only one Pi session's tree (with REF: resolve REF among its threads): its session
        /// id (a unique prefix of 8+ characters will do), its name, or `latest`.
        #[arg(long, value_name = "ID|NAME|latest", conflicts_with = "manager")]
        session: Option<String>,
        /// Print {"trees": [{rootSession, threads, …totals, budget?, rows}]} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Move a closed thread of a Pi session that has ended under another session, so that
    /// session's `thread` tool reaches it (resume, poll, list). REF is a thread id or a
    /// canonical path; never a thread whose session's serve is running.
    Adopt {
        /// A thread id (thread_…) or a canonical path (/root/task).
        reference: String,
        /// The adopting session: its session file or id (default: the newest session of Pi's
        /// session folder for this directory, the one `pi -c` continues).
        #[arg(long, value_name = "SESSION")]
        into: Option<String>,
        /// Print {"adopted": {id, path, oldPath, fromSession, intoSession, …}} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Answer a child's pending question (THREADBASE_UI=parent): VALUE is yes or no for a
    /// confirm, one of the options for a select, the text for input and editor. REF is a
    /// thread id or a canonical path.
    Answer {
        /// A thread id (thread_…) or a canonical path (/root/task).
        reference: String,
        /// The answer.
        value: String,
        /// Print {"answered": {threadId, path, question, answer}} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// What an isolated thread (THREADBASE_ISOLATION=worktree) changed since its base commit,
    /// committed or not, untracked files included, as `git diff` prints it.
    Diff {
        /// A thread id (thread_…), a canonical path (/root/task), or a task name.
        reference: String,
        /// Only the files and their counts (`git diff --stat`).
        #[arg(long)]
        stat: bool,
    },
    /// Bring an isolated thread's changes into the main work tree's current branch (its
    /// uncommitted work committed on its branch first). Refused, with nothing changed, while
    /// the thread is busy, when the main tree has uncommitted changes to the same files, or on
    /// a conflict.
    Merge {
        /// A thread id (thread_…), a canonical path (/root/task), or a task name.
        reference: String,
        /// One commit with the thread's changes instead of a merge commit.
        #[arg(long)]
        squash: bool,
        /// Print {"merged": {threadId, path, branch, into, repo, squash, committed, head, files}}.
        #[arg(long)]
        json: bool,
    },
    /// The worktrees of isolated threads: list them, or remove finished ones.
    Worktree {
        #[command(subcommand)]
        action: WorktreeAction,
    },
    /// Run one read-only SQL statement; a statement that would write is refused.
    Sql {
        /// One SELECT (or other read-only) statement, e.g. "SELECT path, phase FROM live_threads".
        query: String,
        /// Print the rows as a JSON array of objects instead of an aligned table.
        #[arg(long)]
        json: bool,
        /// Stop the statement after this many seconds (exit status 2); 0 turns the bound off.
        /// Ctrl-C stops it too (exit status 130).
        #[arg(long, value_name = "SECONDS", default_value_t = sql::DEFAULT_TIMEOUT_SECS, value_parser = sql::parse_timeout, allow_negative_numbers = true)]
        timeout: f64,
        /// Print at most N rows; the rest are counted and the count is reported.
        #[arg(long, value_name = "N")]
        max_rows: Option<usize>,
    },
    /// Contract B's reap: every main session forgets its completed subagent threads that have
    /// no descendant that stays (working, paused, failed or stopped). Reaped threads free their
    /// slot and cannot be resumed; their rows (marked reaped), usage and session files stay.
    Reap {
        /// Only list what would be reaped.
        #[arg(long)]
        dry_run: bool,
        /// Print {"dryRun", "count", "threads": [{session, path}]} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The crash-restore pass: every thread left live by a process that is gone becomes
    /// closed/stale (contract B: paused); surviving process groups are killed when pid and start
    /// time still match. Nothing is restarted.
    Restore {
        /// Print {"restored", "killedGroups", "rejected"} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Verify the database read-only: SQLite integrity and foreign keys, then the engine's
    /// invariants. Exit 0 when no errors (warnings allowed), 1 when errors were found, 2 when
    /// the database cannot be checked at all.
    Check {
        /// Print {"ok", "problems", "checked"} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The threads RPC over HTTP: POST /threads/snapshot and /threads/restore with a bearer
    /// token, on this database (loopback only unless --allow-remote).
    Http(http::HttpArgs),
    /// A live web page over every root session's tree: the threads with their state and
    /// spend, a thread's detail and events, the usage roll-up, and stop, send and archive
    /// (loopback only unless --allow-remote; the token from --token or $THREADBASE_TOKEN).
    Web(web::WebArgs),
    /// A terminal UI over the database: the thread tree per root session (the newest expanded,
    /// older ones a line each; `e` expands or collapses one), filters, a detail pane (the
    /// `poll` projection at tail detail) and an emergency stop.
    Top {
        /// Only one Pi session's tree: its session id (a unique prefix of 8+ characters will
        /// do), its name, or `latest`.
        #[arg(long, value_name = "ID|NAME|latest")]
        session: Option<String>,
    },
    /// A child that speaks Pi's RPC protocol (1.6 dialect) and follows a JSON script; for tests
    /// and the demo. Pi's flags after the script are accepted as Pi accepts them.
    ScriptedAgent {
        /// The JSON script: turns of steps (delays, tool calls, text) and a default reply.
        #[arg(long, value_name = "FILE")]
        script: PathBuf,
        /// Pi's own flags (--mode rpc, --session FILE, --name, …), accepted as Pi accepts them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Which trees `list` and `tree` show.
#[derive(Debug, Args)]
pub struct TreeArgs {
    /// Only threads whose path matches this glob ('/root/api_*'; see `stop`).
    #[arg(long = "match", value_name = "GLOB")]
    matching: Option<String>,
    /// Only one Pi session's tree: its session id (a root session's, or a child's own
    /// serve's; a unique prefix of 8+ characters will do), its name, or `latest` (the session
    /// with the most recent thread activity).
    #[arg(long, value_name = "ID|NAME|latest")]
    session: Option<String>,
    /// The older spelling of --session latest.
    #[arg(long, conflicts_with = "session")]
    latest: bool,
}

impl TreeArgs {
    fn filters(&self, json: bool) -> inspect::TreeFilters<'_> {
        inspect::TreeFilters {
            matching: self.matching.as_deref(),
            session: match (&self.session, self.latest) {
                (Some(s), _) => Some(s.as_str()),
                (None, true) => Some("latest"),
                (None, false) => None,
            },
            json,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum PiAction {
    /// Write the extension to <agent dir>/threadbase (with --local: ./.pi/threadbase), record
    /// this binary's path beside it, and register it with `pi install` (or, without a `pi` to
    /// run, in settings.json exactly as `pi install` writes it).
    Install {
        /// Install for this project (./.pi/settings.json) instead of for you
        /// ($PI_CODING_AGENT_DIR/settings.json, else ~/.pi/agent/settings.json).
        #[arg(long, short = 'l')]
        local: bool,
        /// The `pi` program to register with (default: `pi` on PATH).
        #[arg(long, value_name = "PROGRAM")]
        pi: Option<String>,
    },
    /// Undo `threadbase pi install`: unregister the package and delete its folder.
    Uninstall {
        /// Remove the project install (./.pi/threadbase) instead of the personal one.
        #[arg(long, short = 'l')]
        local: bool,
        /// The `pi` program to unregister with (default: `pi` on PATH).
        #[arg(long, value_name = "PROGRAM")]
        pi: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum WorktreeAction {
    /// Every isolated thread's worktree: its thread, state, folder, branch and what it changed.
    List {
        /// Print {"worktrees": [{threadId, threadPath, state, repo, path, branch, baseCommit,
        /// createdAt, removedAt?, present, filesChanged, insertions, deletions, hostId}]}.
        #[arg(long)]
        json: bool,
    },
    /// Remove the worktree folders and branches of closed threads on this host (never a live
    /// thread's) and mark their rows removed. Pass --merged, --closed or a thread reference.
    Clean {
        /// One thread's worktree (a thread id, canonical path or task name).
        reference: Option<String>,
        /// Only closed threads whose work is merged into the main tree's current branch.
        #[arg(long)]
        merged: bool,
        /// Every closed thread's worktree, merged or not (unmerged work is lost).
        #[arg(long)]
        closed: bool,
        /// Only print what would be removed.
        #[arg(long)]
        dry_run: bool,
        /// Print {"worktrees": [{threadId, threadPath, path, branch, outcome}]}.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum HostAction {
    /// Every host with a serve row: its boot, serves up, last heartbeat (the database's clock),
    /// lease (up, or unreachable since its last heartbeat, 30 s on) and live threads; under a
    /// host, each of its serves that is degraded (its row watcher holds no connection).
    List {
        /// Print {"hosts": [{hostId, bootId, lastHeartbeat, servesUp, up, liveThreads,
        /// collision, degradedServes: [{hostId, pid, since, reason}]}], "outageUntil"}.
        #[arg(long)]
        json: bool,
    },
    /// Close the live threads of a host whose lease ran out as stale (nothing is signalled:
    /// its processes are its own) and drop its serve rows. Refused for a host that is up,
    /// within a lease after the database came back from an outage, and (without --force)
    /// while its last heartbeat is younger than two leases.
    Forget {
        /// The host id, as `host list` shows it.
        id: String,
        /// Forget a host whose last heartbeat is younger than two leases (60 s).
        #[arg(long)]
        force: bool,
        /// Print {"host", "closed": [thread ids]}.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum BudgetAction {
    /// The caps and what was spent (the default).
    Show {
        #[arg(long)]
        json: bool,
    },
    /// Set a scope's caps (at least one of --tokens, --usd and, for `thread`, --turns),
    /// replacing what was set; a cap left out is no cap of that kind.
    Set {
        /// `tree` (each root session's whole tree), `team` (the whole database) or `thread`
        /// (each thread).
        #[arg(long, value_name = "tree|team|thread")]
        scope: String,
        /// A cap on every token (input, output, cache reads and writes), e.g. 2000000.
        #[arg(long, value_name = "N", allow_hyphen_values = true)]
        tokens: Option<String>,
        /// A cap on the cost in US dollars, e.g. 25 or 2.50.
        #[arg(long, value_name = "DOLLARS", allow_hyphen_values = true)]
        usd: Option<String>,
        /// A cap on a thread's turns (its completed assistant messages), e.g. 20; scope
        /// `thread` only.
        #[arg(long, value_name = "N", allow_hyphen_values = true)]
        turns: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Remove a scope's caps.
    Clear {
        #[arg(long, value_name = "tree|team|thread")]
        scope: String,
        #[arg(long)]
        json: bool,
    },
}

/// The database path: `--db`, else `$THREADBASE_DB`, else `$PI_CODING_AGENT_DIR/threadbase.sqlite`,
/// else `~/.pi/agent/threadbase.sqlite`.
pub fn default_db_path(flag: Option<PathBuf>) -> PathBuf {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = flag {
        return p;
    }
    if let Some(p) = non_empty("THREADBASE_DB") {
        return PathBuf::from(p);
    }
    if let Some(dir) = non_empty("PI_CODING_AGENT_DIR") {
        return PathBuf::from(dir).join("threadbase.sqlite");
    }
    let home = non_empty("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".pi").join("agent").join("threadbase.sqlite")
}

/// The file `name` beside the database `db` (the log, the HTTP token); for a PostgreSQL
/// database, which has no folder, in Pi's agent folder (`$PI_CODING_AGENT_DIR`, else
/// `~/.pi/agent`).
pub fn beside_database(db: &std::path::Path, name: &str) -> PathBuf {
    if crate::store::database_url(db).is_none() {
        return db
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| std::path::Path::new("."))
            .join(name);
    }
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    var("PI_CODING_AGENT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            var("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."))
                .join(".pi")
                .join("agent")
        })
        .join(name)
}

/// A PostgreSQL URL's password moves into `PGPASSWORD` (read back when connecting, inherited by
/// the serve's children), so the database is named everywhere without it.
fn without_password(db: PathBuf) -> PathBuf {
    let (shown, password) = crate::store::split_password(db);
    if let Some(pw) = password {
        // Before any thread starts: the command's threads come after this point.
        std::env::set_var("PGPASSWORD", pw);
    }
    shown
}

/// Parses the command line, runs it, and maps errors to a message on stderr and exit code 2.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let db = without_password(default_db_path(cli.db.clone()));
    // `serve` adds its log file itself; `top` owns the terminal, so nothing may write over it.
    if !matches!(cli.command, Command::Serve(_) | Command::Top { .. }) {
        let _ = logging::init(None);
    }
    // Every row a command writes or judges by its process names a host (issue 33): a host id
    // that cannot be used stops the command before it touches the database.
    let needs_host = !matches!(
        cli.command,
        Command::ScriptedAgent { .. } | Command::Pi { .. }
    );
    if let (true, Err(e)) = (needs_host, crate::host::HostIdentity::current()) {
        return report(&e);
    }
    if let (true, Err(e)) = (needs_host, crate::store::refuse_unsupported_url(&db)) {
        return report(&e);
    }
    let mut out = std::io::stdout().lock();
    let result = match cli.command {
        Command::Demo { keep } => demo::run(keep, &mut out),
        Command::Serve(args) => {
            drop(out);
            serve::run(db, args)
        }
        Command::List {
            state,
            visibility,
            trees,
            json,
        } => inspect::list(&db, &trees.filters(json), &state, &visibility, &mut out),
        Command::Tree { trees, json } => inspect::tree(&db, &trees.filters(json), &mut out),
        Command::Show {
            reference,
            manager,
            session,
            json,
        } => inspect::show(&db, &reference, within(&manager, &session), json, &mut out),
        Command::Events {
            reference,
            manager,
            session,
            matching,
            json,
        } => match (reference, matching) {
            (Some(reference), _) => {
                inspect::events(&db, &reference, within(&manager, &session), json, &mut out)
            }
            (None, matching) => inspect::events_matching(
                &db,
                matching.as_deref().unwrap_or("**"),
                within(&manager, &session),
                json,
                &mut out,
            ),
        },
        Command::Pi { action } => match action {
            PiAction::Install { local, pi } => pi::install(local, pi.as_deref(), &mut out),
            PiAction::Uninstall { local, pi } => pi::uninstall(local, pi.as_deref(), &mut out),
        },
        Command::Stop {
            patterns,
            force,
            manager,
            timeout,
            json,
        } => {
            return stop::run(
                &db,
                &stop::StopArgs {
                    patterns: &patterns,
                    force,
                    manager: manager.as_deref(),
                    timeout: std::time::Duration::from_secs_f64(timeout.clamp(0.0, 3600.0)),
                    json,
                },
                &mut out,
            )
        }
        Command::Usage {
            reference,
            manager,
            session,
            json,
        } => usage::run(
            &db,
            reference.as_deref(),
            within(&manager, &session),
            json,
            &mut out,
        ),
        Command::Answer {
            reference,
            value,
            json,
        } => answer::run(&db, &reference, &value, json, &mut out),
        Command::Adopt {
            reference,
            into,
            json,
        } => adopt::run(
            &db,
            &adopt::AdoptArgs {
                reference: &reference,
                into: into.as_deref(),
                json,
            },
            &mut out,
        ),
        Command::Sql {
            query,
            json,
            timeout,
            max_rows,
        } => {
            let bounds = sql::Bounds {
                timeout_secs: Some(timeout),
                max_rows,
                ctrl_c: true,
            };
            sql::run(&db, &query, json, &bounds, &mut out)
        }
        Command::Restore { json } => restore(&db, json, &mut out),
        Command::Budget { action, json } => match action {
            None => budget::show(&db, json, &mut out),
            Some(BudgetAction::Show { json: j }) => budget::show(&db, json || j, &mut out),
            Some(BudgetAction::Set {
                scope,
                tokens,
                usd,
                turns,
                json: j,
            }) => budget::set(
                &db,
                &scope,
                budget::CapArgs {
                    tokens: tokens.as_deref(),
                    usd: usd.as_deref(),
                    turns: turns.as_deref(),
                },
                json || j,
                &mut out,
            ),
            Some(BudgetAction::Clear { scope, json: j }) => {
                budget::clear(&db, &scope, json || j, &mut out)
            }
        },
        Command::Diff { reference, stat } => worktree::diff(&db, &reference, stat, &mut out),
        Command::Merge {
            reference,
            squash,
            json,
        } => worktree::merge(&db, &reference, squash, json, &mut out),
        Command::Worktree { action } => match action {
            WorktreeAction::List { json } => worktree::list(&db, json, &mut out),
            WorktreeAction::Clean {
                reference,
                merged,
                closed,
                dry_run,
                json,
            } => worktree::clean(
                &db,
                &crate::engine::review::CleanArgs {
                    reference: reference.as_deref(),
                    merged,
                    closed,
                    dry_run,
                },
                json,
                &mut out,
            ),
        },
        Command::Host { action } => match action {
            HostAction::List { json } => host::list(&db, json, &mut out),
            HostAction::Forget { id, force, json } => host::forget(&db, &id, force, json, &mut out),
        },
        Command::Reap { dry_run, json } => reap::run(&db, dry_run, json, &mut out),
        Command::Check { json } => return check::run(&db, json, &mut out),
        Command::Http(args) => http::run(db, args, &mut out),
        Command::Web(args) => web::run(db, args, &mut out),
        Command::Top { session } => {
            drop(out);
            top::run(&db, session.as_deref())
        }
        Command::ScriptedAgent { script, args } => {
            drop(out);
            crate::pi::scripted_agent::run(&script, &args)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => report(&e),
    }
}

/// `--manager` / `--session` as the reference commands take them.
fn within<'a>(manager: &'a Option<String>, session: &'a Option<String>) -> select::Within<'a> {
    select::Within {
        manager: manager.as_deref(),
        session: session.as_deref(),
    }
}

fn restore(db: &std::path::Path, json: bool, out: &mut dyn std::io::Write) -> crate::Result<()> {
    let store = crate::Store::open_existing(db)?;
    let me = crate::runtime::signals::ProcessIdentity::current();
    let report = crate::engine::restore_dead_owners(&store, me)?;
    if json {
        let doc = serde_json::json!({"restored": report.restored, "killedGroups": report.killed_groups, "rejected": report.rejected});
        writeln!(out, "{doc}")?;
    } else {
        writeln!(
            out,
            "restored {} thread{} (closed as stale); killed {} surviving process group{}",
            report.restored.len(),
            if report.restored.len() == 1 { "" } else { "s" },
            report.killed_groups.len(),
            if report.killed_groups.len() == 1 {
                ""
            } else {
                "s"
            }
        )?;
        for id in &report.restored {
            writeln!(out, "  {id}")?;
        }
    }
    if let Some(first) = report.rejected.first() {
        return Err(Error::new(
            crate::error::ErrorCode::Internal,
            format!(
                "{} registr{} refused: {first}",
                report.rejected.len(),
                if report.rejected.len() == 1 {
                    "y"
                } else {
                    "ies"
                }
            ),
        ));
    }
    Ok(())
}

fn report(e: &Error) -> ExitCode {
    if e.is_broken_pipe() {
        // `threadbase list | head`: the reader has what it wanted; exit as SIGPIPE would.
        return ExitCode::from(141);
    }
    if e.is_ctrl_c() {
        // Stopped by Ctrl-C: say so, and exit as a command ended by SIGINT does.
        eprintln!("threadbase: {}", e.message);
        return ExitCode::from(130);
    }
    eprintln!("threadbase: error[{}]: {}", e.code, e.message);
    ExitCode::from(2)
}
