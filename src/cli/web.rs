//! `threadbase web`: the live web view (`serve::web`) on this database. Loopback only unless
//! `--allow-remote`; every request needs the token (`--token`, else `$THREADBASE_TOKEN`, else
//! the database's kept token, made on the first start: [`token_file`]). It opens an existing
//! database only, as `tree` does (issue 50).
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
    /// $THREADBASE_TOKEN, else the one kept beside the database (DB.web-token, mode 0600; made
    /// on the first start), printed in the address to open.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Open the page in the default browser.
    #[arg(long)]
    pub open: bool,
}

/// The token: --token, else $THREADBASE_TOKEN, else `kept` (the database's kept token, made
/// on first use); checked to be usable in a header and a cookie.
fn token(given: Option<String>, kept: impl FnOnce() -> Result<String>) -> Result<String> {
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
            None => return kept(),
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
    // An existing database only, as `tree` opens it: a typo'd path is refused, nothing made.
    let store = Arc::new(Store::open_existing(&db)?);
    let token = token(args.token, || {
        kept_token(&token_file(&db, store.is_postgres())?)
    })?;
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

/// Where the token of `db` is kept across restarts of `web` (issue 50): beside a SQLite file as
/// `<file>.web-token`; for a PostgreSQL database (no file to sit beside) in the user's config,
/// `$XDG_CONFIG_HOME/threadbase/web-token-<hash of the URL>` (else `~/.config/…`).
pub fn token_file(db: &std::path::Path, postgres: bool) -> Result<PathBuf> {
    if !postgres {
        let mut name = db.as_os_str().to_owned();
        name.push(".web-token");
        return Ok(PathBuf::from(name));
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .ok_or_else(|| {
            Error::invalid(
                "No place to keep the web token: neither XDG_CONFIG_HOME nor HOME is set. Repair: set one of them, or pass --token (or $THREADBASE_TOKEN).",
            )
        })?;
    // FNV-1a of the URL: stable across runs and builds (the std hasher is not).
    let hash = db
        .to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    Ok(config
        .join("threadbase")
        .join(format!("web-token-{hash:016x}")))
}

/// The token kept in `file`, or a new random one written there (mode 0600, created
/// exclusively so two `web` starting at once agree on one).
pub fn kept_token(file: &std::path::Path) -> Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let unreadable = |e: std::io::Error| {
        Error::io(format!(
            "Cannot keep the web token in {}: {e}. Repair: make its folder writable, delete the file if it is damaged (open pages then need the new address), or pass --token (or $THREADBASE_TOKEN).",
            file.display()
        ))
    };
    let read = |file: &std::path::Path| -> Result<Option<String>> {
        let mut text = String::new();
        match std::fs::File::open(file) {
            Ok(mut f) => {
                f.read_to_string(&mut text).map_err(unreadable)?;
                let t = text.trim().to_string();
                Ok((t.len() >= 16 && t.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(t))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(unreadable(e)),
        }
    };
    if let Some(t) = read(file)? {
        return Ok(t);
    }
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(unreadable)?;
    }
    if file.exists() {
        return Err(unreadable(std::io::Error::other(
            "it holds no token of at least 16 letters and digits",
        )));
    }
    let fresh = crate::ids::random_hex(32);
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
    {
        Ok(mut f) => {
            f.write_all(format!("{fresh}\n").as_bytes())
                .map_err(unreadable)?;
            Ok(fresh)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(file)?.ok_or_else(|| {
            unreadable(std::io::Error::other(
                "another `web` is writing it; start again",
            ))
        }),
        Err(e) => Err(unreadable(e)),
    }
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
    fn the_kept_token_is_made_once_with_mode_0600_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = token_file(&dir.path().join("t.sqlite"), false).unwrap();
        assert_eq!(file, dir.path().join("t.sqlite.web-token"));
        let first = kept_token(&file).unwrap();
        assert_eq!(first.len(), 32);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(kept_token(&file).unwrap(), first);
        std::fs::write(&file, "x").unwrap();
        let e = kept_token(&file).unwrap_err();
        assert!(e.message.contains("Repair:"), "{}", e.message);
    }

    #[test]
    fn a_given_token_must_be_long_and_plain() {
        assert_eq!(
            token(Some("a".repeat(16)), || unreachable!()).unwrap(),
            "a".repeat(16)
        );
        for bad in ["short", "has space 0123456789", "semi;colon0123456789"] {
            let e = token(Some(bad.to_string()), || unreachable!()).unwrap_err();
            assert!(e.message.contains("Repair:"), "{}", e.message);
        }
    }
}
