//! `threadbase serve`: builds the manager's scope from flags and `PI_THREADS_*` variables,
//! runs the restore pass, and serves JSON lines on stdin/stdout.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use tracing::Instrument;

use super::logging;
use crate::engine::restore_dead_owners;
use crate::engine::{Engine, ServeConfig, Settings};
use crate::error::{Error, Result};
use crate::runtime::signals::ProcessIdentity;
use crate::runtime::Runtime;
use crate::Store;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The parent Pi session file; the manager's identity is its header id.
    #[arg(long, value_name = "FILE")]
    pub session_file: Option<PathBuf>,
    /// The manager's (and caller's) session id; overrides the session file's header id.
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
    /// The parent's cwd (default: this process's cwd).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// The caller's own thread path (default: $PI_THREADS_PATH, else /root).
    #[arg(long, value_name = "PATH")]
    pub scope_path: Option<String>,
    /// The parent Pi's argv as a JSON array, for flag inheritance.
    #[arg(long, value_name = "JSON")]
    pub parent_args: Option<String>,
    /// The parent project is trusted: children inside its cwd get --approve.
    #[arg(long)]
    pub trusted: bool,
    /// How results are written: `contract` (default), every result exactly as the contract
    /// shapes it; `compact`, in ASCII and with the placeholder 0 for members the client copies
    /// (a list's `details.snapshots` and each listed `resultSummary`; the Pi extension asks
    /// for this and sets them).
    #[arg(long, value_enum, value_name = "FORM", default_value_t)]
    pub wire: crate::contract::Wire,
    /// Before each answer, send a `usage` notification (`{"method": "usage", "params":
    /// {"requestId", "usage"}}`) with what the threads below this session spent since the
    /// last one, in Pi's usage shape, each token reported once (the Pi extension asks for
    /// this and adds it to its tool result, so Pi counts children in the session's totals).
    #[arg(long)]
    pub report_usage: bool,
    /// Send a `status` notification (`{"method": "status", "params": {"text", "counts",
    /// "costUsd", "tokens"}}`) whenever the threads of this session's whole tree change
    /// condition or the tree's spend changes (the Pi extension of an interactive session asks
    /// for this and shows the text in Pi's footer). Ignored by a managed child's serve.
    #[arg(long)]
    pub report_status: bool,
    /// Also append the log to this file (default with no PATH: threadbase.log beside the
    /// database; also set by $THREADBASE_LOG_FILE). $THREADBASE_LOG sets the filter; the file
    /// records threadbase's debug detail by default. Children's serves write to the same file.
    #[arg(long, value_name = "PATH", num_args = 0..=1)]
    pub log_file: Option<Option<PathBuf>>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Builds the configuration from flags and environment (warnings go to stderr).
pub fn config(db: PathBuf, args: ServeArgs) -> Result<ServeConfig> {
    let cwd = match args.cwd {
        Some(c) => c,
        None => std::env::current_dir()?,
    };
    let cwd = dunce::canonicalize(&cwd).map_err(|e| {
        Error::invalid(format!("--cwd {} is not an existing directory ({e}). Repair: pass the parent's working directory.", cwd.display()))
    })?;
    let header_id = match &args.session_file {
        Some(f) if f.exists() => Some(
            crate::pi::session::SessionFile::read(f)?
                .header_id()
                .to_string(),
        )
        .filter(|s| !s.is_empty()),
        _ => None,
    };
    let session_id = args
        .session_id
        .or(header_id)
        .or_else(|| env("PI_THREADS_SELF_ID").map(|id| format!("session-of-{id}")))
        .unwrap_or_else(|| format!("ses_{}", crate::ids::random_hex(24)));
    let scope_path = args
        .scope_path
        .or_else(|| env("PI_THREADS_PATH"))
        .unwrap_or_else(|| crate::paths::ROOT.to_string());
    let agent_path = scope_path.starts_with('/')
        && crate::paths::resolve_agent_path(&scope_path, crate::paths::ROOT).is_ok();
    if !crate::paths::is_canonical_thread_path(&scope_path) && !agent_path {
        return Err(Error::invalid(format!(
            "The scope path {} is not a canonical thread path. Repair: pass --scope-path like /root, /root/task or an independent root such as /k (or unset PI_THREADS_PATH).",
            crate::paths::json_quote(&scope_path)
        )));
    }
    let parent_args: Vec<String> = match args.parent_args {
        Some(json) => serde_json::from_str(&json).map_err(|e| {
            Error::invalid(format!("--parent-args must be a JSON array of strings ({e}). Repair: pass e.g. '[\"pi\",\"--model\",\"x\"]'."))
        })?,
        None => Vec::new(),
    };
    let pi_command = super::pi::pi_command_from_env()?;
    let self_id: Option<crate::domain::ThreadId> = env("PI_THREADS_SELF_ID").map(Into::into);
    let mut warn = |w: String| eprintln!("{w}");
    let depth = crate::engine::env_integer(
        "PI_THREADS_DEPTH",
        env("PI_THREADS_DEPTH").as_deref(),
        0,
        &mut warn,
    ) as i64;
    let settings = Settings::from_env(&|k| env(k), &mut warn);
    let agent_dir = env("PI_CODING_AGENT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env("HOME").unwrap_or_else(|| ".".into()))
                .join(".pi")
                .join("agent")
        });
    // Contract B's settings files (a bad value stops serve here, with its Repair:).
    let agent_dir_for_settings = agent_dir.clone();
    let cwd_for_settings = cwd.clone();
    Ok(ServeConfig {
        session_file: args.session_file,
        root_session_id: env("PI_THREADS_ROOT_SESSION_ID")
            .unwrap_or_else(|| session_id.clone())
            .into(),
        session_id: session_id.into(),
        cwd,
        scope_path,
        depth,
        self_id: self_id.clone(),
        parent_path: env("PI_THREADS_PARENT_PATH"),
        parent_id: env("PI_THREADS_PARENT_ID").map(Into::into),
        parent_args,
        trusted: args.trusted,
        wire: args.wire,
        report_usage: args.report_usage,
        report_status: args.report_status && self_id.is_none(),
        pi_command,
        agent_dir,
        db,
        settings,
        budget: crate::engine::budget::Budget::from_env(&|k| env(k))?,
        agent_settings: std::sync::Arc::new(crate::contract::agent_settings::AgentSettings::load(
            &agent_dir_for_settings,
            args.trusted.then_some(cwd_for_settings.as_path()),
        )?),
    })
}

/// Issue 46: this serve's first heartbeat, then the serves of its host id whose heartbeat has
/// not lapsed: one of another boot (a cloned machine) or of a PID space this process cannot see
/// (a container sharing the machine id) means the host id is not unique, and this serve would
/// take that serve's threads for its own. It refuses to start (`conflict`), its row removed,
/// before its restore pass changes anything. Two such serves starting at once both see the
/// other's first heartbeat, so neither starts.
fn refuse_a_colliding_host_id(store: &Store) -> Result<()> {
    let me = ProcessIdentity::current();
    // Two serves of one host id starting at once take turns (PostgreSQL), so the second
    // sees the first's heartbeat.
    let serves = store.write_facts(|tx| {
        tx.lock(crate::store::Lock::HostId(
            &crate::host::HostIdentity::here().host_id,
        ))?;
        let beat = crate::store::hosts::heartbeat(tx, me, None, None)?;
        store.note_other_hosts(beat.others);
        crate::store::hosts::live_serves(tx)
    })?;
    if let Some(other) = crate::store::hosts::collision(&serves, me) {
        let refused = crate::store::hosts::collision_error(other);
        if let Err(e) = store.write(|tx| crate::store::hosts::serve_ended(tx, me)) {
            tracing::warn!("removing this serve's heartbeat failed: {e}");
        }
        return Err(refused);
    }
    Ok(())
}

pub fn run(db: PathBuf, args: ServeArgs) -> Result<()> {
    run_on(db.clone(), args).map_err(|e| crate::store::name_database(&db, e))
}

fn run_on(db: PathBuf, args: ServeArgs) -> Result<()> {
    let log_file = logging::log_file(
        args.log_file.clone(),
        env(logging::LOG_FILE_ENV).as_deref(),
        &db,
    );
    logging::init(log_file.as_deref())?;
    if let Some(path) = &log_file {
        // Children's own serves (started by their Pi extension) log to the same file. Set while
        // this process has one thread, before anything reads the environment concurrently.
        std::env::set_var(logging::LOG_FILE_ENV, path);
    }
    let cfg = config(db.clone(), args)?;
    // Said once at start, before any thread needs it: a child command that cannot run would
    // otherwise surface only as the first start's failure.
    if let Err(warning) = super::pi::check_child_command(&cfg.pi_command) {
        eprintln!("threadbase serve: warning: {warning}");
    }
    let span = tracing::info_span!("serve", pid = std::process::id(), session = %cfg.session_id);
    let _entered = span.enter();
    tracing::info!(db = %db.display(), scope = %cfg.scope_path, cwd = %cfg.cwd.display(), "serve starting");
    let store = Arc::new(Store::open(&db)?);
    // Other holders of the store (the ingest thread) may outlive the runtime: the WAL is
    // settled through this handle once serve is done.
    let settle = store.clone();
    tracing::debug!("database open");
    refuse_a_colliding_host_id(&store)?;
    // Every rule that checks before it writes lives in one tree: on PostgreSQL this serve's
    // writes take turns with the other writers of its tree only.
    store.serialize_tree(cfg.root_session_id.as_str());
    let report = restore_dead_owners(&store, ProcessIdentity::current())?;
    tracing::debug!("restore pass done");
    for rejected in &report.rejected {
        tracing::warn!("restore refused a registry: {rejected}");
        eprintln!("threadbase serve: {rejected}");
    }
    if !report.restored.is_empty() {
        tracing::info!(threads = ?report.restored, "restored threads left live by a process that is gone");
        eprintln!(
            "threadbase serve: restored {} thread(s) left live by a process that is gone (now closed/stale)",
            report.restored.len()
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(
        async move {
            // A file-size limit (RLIMIT_FSIZE) would kill the server with SIGXFSZ at the first write
            // past it, leaving its children without a reader; handled, the write fails with EFBIG,
            // which SQLite reports as an I/O error the request returns. The handler stays for the
            // life of the process.
            let _xfsz = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(
                rustix::process::Signal::XFSZ.as_raw(),
            ))?;
            let runtime = Runtime::new(store.clone(), cfg.settings.timers);
            if let Some(timeout) = cfg.settings.ui_parent {
                runtime.set_ui_parent(timeout);
            }
            let engine = Engine::new(cfg, store, runtime)?;
            tracing::debug!("manager registered");
            // On a worker, not on this thread (see `server::serve`).
            let served = tokio::spawn(crate::serve::server::serve(engine).in_current_span()).await;
            if let Err(e) = served {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
            tracing::info!("serve stopped");
            Ok::<(), crate::error::Error>(())
        }
        .instrument(span.clone()),
    )?;
    // Blocking tasks still under way (a watcher's restore pass) end before the WAL is settled:
    // a reader's snapshot would keep the checkpoint from emptying it.
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    // This serve no longer holds its host's lease.
    if let Err(e) =
        settle.write(|tx| crate::store::hosts::serve_ended(tx, ProcessIdentity::current()))
    {
        tracing::warn!("removing this serve's heartbeat failed: {e}");
    }
    settle.settle_wal();
    Ok(())
}
