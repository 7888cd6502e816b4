//! The scripted agent's command line: everything after `--script FILE`, parsed like Pi 1.6
//! parses its flags (`reference/pi-rpc.md` §13, the table in `pi::flags`), so a bad argv fails
//! here as it would fail real Pi.
//!
//! `--mode rpc` is required (real Pi without it would start its TUI). Honoured:
//! `--session <path>` (absolute, or relative containing `/`, or ending in `.jsonl`),
//! `--session-id <id>`, `--no-session`, `--name <name>`, `--provider <p>`, `--model <[p/]id[:level]>`,
//! `--thinking <level>`. Accepted and ignored: every other Pi flag (`--approve`, `--no-approve`,
//! `--models`, `--tools`, `--exclude-tools`, `--no-tools`, `--offline`, `-e`, `--no-extensions`, …).
//! An unknown option fails with `Error: Unknown option: X`, exit 1. Without `--session` and
//! without `--no-session` the session is kept in memory only (real Pi would pick a file under its
//! agent dir; the scripted agent never writes there) and `get_state` has no `sessionFile`.

use crate::pi::flags::{self, Arity, THINKING_LEVELS};

#[derive(Debug, Default)]
pub(super) struct Args {
    pub(super) session: Option<String>,
    pub(super) session_id: Option<String>,
    pub(super) no_session: bool,
    pub(super) name: Option<String>,
    pub(super) provider: Option<String>,
    pub(super) model: Option<String>,
    pub(super) thinking: Option<String>,
    pub(super) warnings: Vec<String>,
}

impl Args {
    pub(super) fn parse(argv: &[String]) -> std::result::Result<Args, String> {
        let mut a = Args::default();
        let mut mode: Option<String> = None;
        let mut fork = false;
        let mut continue_or_resume = false;
        let mut i = 0;
        while i < argv.len() {
            let raw = &argv[i];
            i += 1;
            if !raw.starts_with('-') || raw == "-" {
                if raw.starts_with('@') {
                    return Err(format!(
                        "Error: @file arguments are not supported in RPC mode: {raw}"
                    ));
                }
                continue; // initial messages: not used in RPC mode
            }
            let (flag, inline) = match raw.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (raw.clone(), None),
            };
            let Some(known) = flags::find(&flag) else {
                return Err(format!("Error: Unknown option: {flag}"));
            };
            if known.arity == Arity::Value {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        let v = argv
                            .get(i)
                            .cloned()
                            .ok_or_else(|| format!("Error: {flag} requires a value"))?;
                        i += 1;
                        v
                    }
                };
                match known.canonical() {
                    "--mode" => mode = Some(value),
                    "--provider" => a.provider = Some(value),
                    "--model" => a.model = Some(value),
                    "--thinking" => a.thinking = Some(value),
                    "--name" => a.name = Some(value),
                    "--session" => a.session = Some(value),
                    "--session-id" => a.session_id = Some(value),
                    "--fork" => fork = true,
                    _ => {}
                }
            } else {
                // An optional value (`--list-models [search]`) is a positional here, ignored.
                match known.canonical() {
                    "--no-session" => a.no_session = true,
                    "--continue" | "--resume" => continue_or_resume = true,
                    _ => {}
                }
            }
        }
        match mode.as_deref() {
            Some("rpc") => {}
            Some(m @ ("text" | "json")) => {
                return Err(format!(
                    "scripted-agent: only --mode rpc is supported, not --mode {m}"
                ))
            }
            _ => return Err(
                "scripted-agent: --mode rpc is required (real Pi would start its interactive TUI)"
                    .into(),
            ),
        }
        if fork && (a.session.is_some() || continue_or_resume || a.no_session) {
            return Err(
                "Error: --fork cannot be combined with --session, --continue, --resume or --no-session"
                    .into(),
            );
        }
        if a.session_id.is_some() && (a.session.is_some() || continue_or_resume) {
            return Err(
                "Error: --session-id cannot be combined with --session, --continue or --resume"
                    .into(),
            );
        }
        if let Some(id) = &a.session_id {
            let ok = !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                && id.starts_with(|c: char| c.is_ascii_alphanumeric())
                && id.ends_with(|c: char| c.is_ascii_alphanumeric());
            if !ok {
                return Err(format!("Error: Invalid session id: {id}"));
            }
        }
        if a.provider.is_some() && a.model.is_none() {
            return Err("Error: --provider requires --model".into());
        }
        if let Some(t) = &a.thinking {
            if !THINKING_LEVELS.contains(&t.as_str()) {
                a.warnings.push(format!(
                    "Warning: Invalid thinking level \"{t}\". Valid values: {}",
                    THINKING_LEVELS.join(", ")
                ));
                a.thinking = None;
            }
        }
        if let Some(s) = &a.session {
            let is_path = s.contains('/') || s.contains('\\') || s.ends_with(".jsonl");
            if !is_path {
                return Err(format!(
                    "scripted-agent: --session {s} looks like a session id prefix; pass an absolute session file path"
                ));
            }
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_like_pi() {
        let a = |v: &[&str]| Args::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let ok = a(&[
            "--mode",
            "rpc",
            "--session",
            "/tmp/x.jsonl",
            "--name",
            "n",
            "--no-approve",
            "--model",
            "fake/m:high",
            "--exclude-tools",
            "bash",
            "--offline",
            "-nt",
        ])
        .unwrap();
        assert_eq!(ok.session.as_deref(), Some("/tmp/x.jsonl"));
        assert_eq!(ok.name.as_deref(), Some("n"));
        assert_eq!(
            a(&["--mode", "rpc", "--bogus"]).unwrap_err(),
            "Error: Unknown option: --bogus"
        );
        assert!(a(&["--session", "/x.jsonl"]).is_err());
        assert!(a(&["--mode", "rpc", "@file.md"]).is_err());
        assert!(a(&[
            "--mode",
            "rpc",
            "--fork",
            "/a.jsonl",
            "--session",
            "/b.jsonl"
        ])
        .is_err());
    }
}
