//! threadbase: an embedded, SQL-backed state engine for trees of background agent sessions.
//!
//! Every fact (threads, paths, events, mailbox messages, reports, archive flags, process
//! leases) is a row in one SQLite file, so the state survives a crash and can be queried with
//! plain SQL. Rules are SQL too: reference resolution, list filters and idempotency are
//! indexed queries and constraints, not loops over loaded rows. See `DESIGN.md` beside the
//! project for the whole picture.
//!
//! The arrow: `cli` and [`serve`] (the server, HTTP, the web view and the watcher) take requests and call
//! [`check`] (`cli`'s verification, over store) or
//! [`engine`], which
//! calls [`contract`] (pure parsing and shaping), [`store`] (every table and query) and
//! [`runtime`] (the child processes, whose rows it writes through store); runtime and store
//! use [`pi`] (what Pi 1.6 is: its flags, events and session files); store, runtime and pi
//! import nothing above them. Under all of
//! them, [`domain`] holds the values the tables hold as types: the state enums and the ids.
//!
//! - [`domain`]: the state columns' enums (`Phase`, `ExitKind`, …) and the ids.
//! - [`engine`]: the operations, one file per verb of each contract, and the serve's one
//!   configuration.
//! - [`contract`]: the three tool contracts' request types, validation and result shapes.
//! - [`runtime`]: child processes (launch, stop, event streams, the restore pass).
//! - [`store`]: open the database and every table, over one of two backends, each in its room
//!   ([`store::sqlite`]: WAL, migrations, reader pool, one writer; [`store::postgres`]); also
//!   contract A's reference resolution ([`store::refs`]) and list filters ([`store::list`]).
//! - [`check`]: `threadbase check`, the read-only verification of a database: its rules, over
//!   the queries of [`store::check`].
//! - [`paths`]: the path grammars of the three contracts.
//! - [`identity`]: a process's identity (pid and start time), a row's owner, and who holds it
//!   ([`identity::holder`]), for every layer that reads an owner from a row.
//! - [`pi`]: what threadbase knows of Pi 1.6 (flags, argv, events, session files, the scripted
//!   agent); [`session`] and [`scripted_agent`] are its modules under their old paths.
//! - [`serve`]: the transport: `serve`'s request loop and response lines, its watcher, the
//!   threads RPC over HTTP, and the live web view (`threadbase web`).
//! - [`cli`]: the `threadbase` command line.
//! - [`worktree`]: the git worktrees of isolated threads (issue 48): every git run, and nothing
//!   of the database.
//! - `fuzzing` (hidden): fuzz target bodies shared by `fuzz/` and `tests/it/fuzz_corpus.rs`.

pub mod check;
pub mod cli;
pub mod contract;
pub mod domain;
pub mod engine;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod identity;
pub mod ids;
pub mod paths;
pub mod pi;
pub mod runtime;
pub mod serve;
pub mod store;
pub mod text;
pub mod time;
pub mod worktree;

pub use error::{Error, ErrorCode, Result};
pub use pi::{scripted_agent, session};
pub use store::Store;
