//! `threadbase http`: the threads RPC (`POST /threads/snapshot`, `POST /threads/restore`) over
//! HTTP on the same database, for the terminal plugin. Loopback only unless `--allow-remote`;
//! every request carries a bearer token (see [`crate::serve::http`] for the wire format).
//!
//! At start it prints `listening on http://ADDR` and then either `token file: PATH` (a generated
//! token, written with mode 0600) or `token: $THREADBASE_HTTP_TOKEN`, and flushes stdout, so a
//! caller that started it with `--listen 127.0.0.1:0` can read the port. SIGTERM or ctrl-c stop
//! it: no new connections, requests in flight get a few seconds to finish, exit code 0.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;

use super::launch;
use crate::error::{Error, Result};
use crate::serve::http::{StoreWorkerRpc, WorkerRpc};
use crate::Store;

/// The environment variable that supplies the token instead of a generated one.
pub const TOKEN_ENV: &str = "THREADBASE_HTTP_TOKEN";
/// The generated token file's name beside the database.
pub const TOKEN_FILE_NAME: &str = "threadbase-http.token";

#[derive(Debug, Args)]
pub struct HttpArgs {
    /// Address to listen on, `HOST:PORT` (port 0 picks a free port). Loopback only unless
    /// --allow-remote.
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
    pub listen: String,
    /// Where to write the generated token (mode 0600). Default: threadbase-http.token beside the
    /// database. Not written when $THREADBASE_HTTP_TOKEN supplies the token.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Accept a --listen address that is not loopback (the token then crosses the network in
    /// clear text: put TLS in front).
    #[arg(long)]
    pub allow_remote: bool,
}

/// Resolves `--listen` and refuses a non-loopback address without `--allow-remote`.
pub fn listen_addr(listen: &str, allow_remote: bool) -> Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| {
            Error::invalid(format!(
                "--listen {listen:?} is not a HOST:PORT address ({e}). Repair: pass e.g. --listen 127.0.0.1:8787 (port 0 picks a free port)."
            ))
        })?
        .collect();
    let Some(first) = addrs.first().copied() else {
        return Err(Error::invalid(format!(
            "--listen {listen:?} resolves to no address. Repair: pass e.g. --listen 127.0.0.1:8787."
        )));
    };
    if !allow_remote {
        if let Some(remote) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(Error::invalid(format!(
                "Refusing to listen on {remote}: it is not a loopback address, and plain HTTP would carry the bearer token and worker data across the network. Repair: listen on 127.0.0.1 or [::1] (the default), or pass --allow-remote if other machines must connect (put TLS in front)."
            )));
        }
    }
    Ok(first)
}

/// `$THREADBASE_HTTP_TOKEN` when set, checked to be usable in a header.
fn env_token() -> Result<Option<String>> {
    let Some(raw) = std::env::var_os(TOKEN_ENV).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let token = raw.into_string().map_err(|_| {
        Error::invalid(format!(
            "${TOKEN_ENV} is not valid UTF-8. Repair: set it to at least 16 visible ASCII characters, or unset it to get a generated token."
        ))
    })?;
    if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::invalid(format!(
            "${TOKEN_ENV} must be at least 16 visible ASCII characters without spaces. Repair: set it to e.g. the output of `openssl rand -hex 32`, or unset it to get a generated token."
        )));
    }
    Ok(Some(token))
}

/// Writes `token` to `path` with mode 0600 (also when the file existed with other modes);
/// refuses to follow a symlink at `path`.
pub fn write_token_file(path: &Path, token: &str) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let fail = |e: std::io::Error| {
        Error::io(format!(
            "Cannot write the token file {} ({e}). Repair: pass --token-file with a writable path that is not a symlink, or set ${TOKEN_ENV}.",
            path.display()
        ))
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(fail)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(fail)?;
    file.write_all(token.as_bytes()).map_err(fail)?;
    file.write_all(b"\n").map_err(fail)?;
    file.sync_all().map_err(fail)?;
    Ok(())
}

/// The third line `threadbase http` prints: what it answers, and what it does not.
pub const SERVES: &str = "serves the worker contract only (threads.snapshot, threads.restore, for coordinator sessions of the threads_* tools): a `thread` or `agent_*` session's threads are not in its answers (an unknown or other session's id gives {\"workers\": []}); read those with `threadbase list`, `tree`, `show` or `sql` on the same database";

pub fn run(db: PathBuf, args: HttpArgs, out: &mut dyn Write) -> Result<()> {
    let addr = listen_addr(&args.listen, args.allow_remote)?;
    let store = Arc::new(Store::open(&db)?);
    let (token, token_line) = match env_token()? {
        Some(t) => (t, format!("token: ${TOKEN_ENV}")),
        None => {
            let token = crate::ids::random_hex(32);
            let path = args
                .token_file
                .clone()
                .unwrap_or_else(|| super::beside_database(&db, TOKEN_FILE_NAME));
            write_token_file(&path, &token)?;
            (token, format!("token file: {}", path.display()))
        }
    };
    let at = launch::Endpoint {
        name: "threadbase http",
        addr,
        repair: "pick a free port, or pass --listen 127.0.0.1:0 for any free port.",
    };
    let announce = |bound: SocketAddr, out: &mut dyn Write| -> Result<()> {
        writeln!(out, "listening on http://{bound}")?;
        writeln!(out, "{token_line}")?;
        writeln!(out, "{SERVES}")?;
        Ok(())
    };
    launch::run(at, store, out, announce, |listener, store, (), stop| {
        let rpc: Arc<dyn WorkerRpc> = Arc::new(StoreWorkerRpc::new(store));
        crate::serve::http::serve(listener, token, rpc, stop)
    })
}
