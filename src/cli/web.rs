//! `threadbase web`: the live web view (`serve::web`) on this database. Loopback only unless
//! `--allow-remote`; every request needs the token (`--token`, else `$THREADBASE_TOKEN`, else
//! one generated for this run).
//!
//! At start it prints `listening on http://ADDR` and `open http://ADDR/?token=TOKEN` (the
//! address that sets the token's cookie), and flushes stdout, so a caller that started it with
//! `--port 0` can read the port. `--open` also hands that address to `xdg-open` (or `open`).
//! SIGTERM or ctrl-c stop it: no new connections, event streams end, exit code 0.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use super::launch;
use crate::error::{Error, Result};
use crate::Store;

/// The environment variable that supplies the token when --token is not given.
pub const TOKEN_ENV: &str = "THREADBASE_TOKEN";

#[derive(Debug, Args)]
pub struct WebArgs {
    /// The port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8790, value_name = "P")]
    pub port: u16,
    /// Listen on every address, not only loopback (the token then crosses the network in
    /// clear text: put TLS in front).
    #[arg(long)]
    pub allow_remote: bool,
    /// The token every request must present (at least 16 visible ASCII characters). Default:
    /// $THREADBASE_TOKEN, else a new random one, printed in the address to open.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Open the page in the default browser.
    #[arg(long)]
    pub open: bool,
}

/// The token: --token, else $THREADBASE_TOKEN, else a random one; checked to be usable in a
/// header and a cookie.
fn token(given: Option<String>) -> Result<String> {
    let (token, from) = match given {
        Some(t) => (t, "--token"),
        None => match std::env::var_os(TOKEN_ENV).filter(|v| !v.is_empty()) {
            Some(v) => (
                v.into_string().map_err(|_| {
                    Error::invalid(format!(
                        "${TOKEN_ENV} is not valid UTF-8. Repair: set it to at least 16 visible ASCII characters, or unset it to get a generated token."
                    ))
                })?,
                "$THREADBASE_TOKEN",
            ),
            None => return Ok(crate::ids::random_hex(32)),
        },
    };
    if token.len() < 16
        || !token
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"&;=%+\",\\".contains(&b))
    {
        return Err(Error::invalid(format!(
            "{from} must be at least 16 visible ASCII characters, without spaces or any of & ; = % + \" , \\. Repair: use e.g. the output of `openssl rand -hex 32`, or leave it out to get a generated token."
        )));
    }
    Ok(token)
}

pub fn run(db: PathBuf, args: WebArgs, out: &mut dyn Write) -> Result<()> {
    let ip = if args.allow_remote {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    };
    let token = token(args.token)?;
    let store = Arc::new(Store::open(&db)?);
    let at = launch::Endpoint {
        name: "threadbase web",
        addr: SocketAddr::new(ip, args.port),
        repair: "pick a free port with --port, or --port 0 for any free port.",
    };
    let announce = |bound: SocketAddr, out: &mut dyn Write| -> Result<String> {
        let shown = if args.allow_remote {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), bound.port())
        } else {
            bound
        };
        let url = format!("http://{shown}/?token={token}");
        writeln!(out, "listening on http://{bound}")?;
        writeln!(out, "open {url}")?;
        Ok(url)
    };
    launch::run(at, store, out, announce, |listener, store, url, stop| {
        if args.open {
            open_browser(&url);
        }
        crate::serve::web::serve(listener, store, token.clone(), stop)
    })
}

/// Hands `url` to the desktop's opener; a failure is a warning (the address is printed).
fn open_browser(url: &str) {
    for opener in ["xdg-open", "open"] {
        let started = std::process::Command::new(opener)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if started.is_ok() {
            return;
        }
    }
    eprintln!("threadbase web: no xdg-open or open to start a browser; open the address above");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_token_must_be_long_and_plain() {
        assert_eq!(token(Some("a".repeat(16))).unwrap(), "a".repeat(16));
        for bad in ["short", "has space 0123456789", "semi;colon0123456789"] {
            let e = token(Some(bad.to_string())).unwrap_err();
            assert!(e.message.contains("Repair:"), "{}", e.message);
        }
    }
}
