//! The transport: how requests reach the engine and answers leave it.
//!
//! - [`server`]: `threadbase serve`'s JSON-lines loop on stdin/stdout (a request line in, a
//!   task per request, its response line out);
//! - [`output`]: the response lines (typed results, results in parts, streamed large ones),
//!   written by a thread of their own or directly by the request's task;
//! - `stdio`: serve's stdin as a stream on the reactor, and stdout's non-blocking writes;
//! - [`watcher`]: the change counter's watcher (command rows for this serve's threads,
//!   notices due to its session), its heartbeat, and its retries while it has no connection;
//! - [`supervision`]: what of the watcher is not running, since when and why, and the note
//!   each answer of a degraded serve carries (issue 46);
//! - [`http`]: the threads RPC (snapshot, restore) over HTTP;
//! - [`web`]: the live web view (`threadbase web`): the page, its reads, actions and events;
//! - `listen`: the accept loop both HTTP servers run (connections, hyper, shutdown).

pub mod http;
pub(crate) mod listen;
pub mod output;
pub mod server;
pub(crate) mod stdio;
pub mod supervision;
pub mod watcher;
pub mod web;
