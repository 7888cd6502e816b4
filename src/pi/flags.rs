//! Pi 1.6's command-line flags, listed once, and the argv a child Pi is started with.
//!
//! Two readers need every flag's spellings and whether it takes a value: the scripted agent,
//! which must refuse what Pi refuses, and the contracts' inheritance rules
//! (`contract::args`), which must skip a flag's value with it. One table keeps them from
//! drifting apart; [`Flag::inherit`] records what the inheritance rules (pi-threads') make of
//! each flag.

use std::path::Path;

use Arity::{Optional, Switch, Value};
use Inherit::{Skip, Unlisted};

/// Whether a flag takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// Takes none.
    Switch,
    /// Always the next token (or `--flag=value`).
    Value,
    /// The next token only when it is neither flag-like nor `@…` (`--list-models [search]`).
    Optional,
}

/// What a child makes of the flag in its parent's argv (pi-threads' rules, which every
/// contract's child inherits by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inherit {
    /// Inherited under its canonical name. `in_args`: also accepted in a child's own args
    /// (`start.args`); `path`: its value is a resource path, resolved against the parent's
    /// start cwd when inherited.
    Keep { in_args: bool, path: bool },
    /// Never inherited (session, mode, name, approval, one-shot and secret flags); a value is
    /// skipped with it.
    Skip,
    /// Not in pi-threads' lists: treated like an unknown `--flag` (it takes a following token
    /// that is neither flag-like nor `@…` as its value).
    Unlisted,
}

/// One flag of Pi 1.6.
#[derive(Debug)]
pub struct Flag {
    /// Every spelling, canonical first.
    pub aliases: &'static [&'static str],
    pub arity: Arity,
    pub inherit: Inherit,
}

impl Flag {
    /// The canonical (first) spelling.
    pub fn canonical(&self) -> &'static str {
        self.aliases[0]
    }
}

const fn flag(aliases: &'static [&'static str], arity: Arity, inherit: Inherit) -> Flag {
    Flag {
        aliases,
        arity,
        inherit,
    }
}

const ARG: Inherit = Inherit::Keep {
    in_args: true,
    path: false,
};
const KEEP: Inherit = Inherit::Keep {
    in_args: false,
    path: false,
};
const PATH: Inherit = Inherit::Keep {
    in_args: false,
    path: true,
};
/// Every flag Pi 1.6 accepts (`reference/pi-rpc.md` §13).
pub const FLAGS: &[Flag] = &[
    // Inherited, and allowed in a child's own args.
    flag(&["--provider"], Value, ARG),
    flag(&["--model"], Value, ARG),
    flag(&["--models"], Value, ARG),
    flag(&["--thinking"], Value, ARG),
    flag(&["--exclude-tools", "-xt"], Value, ARG),
    flag(&["--no-tools", "-nt"], Switch, ARG),
    flag(&["--no-builtin-tools", "-nbt"], Switch, ARG),
    flag(&["--offline"], Switch, ARG),
    flag(&["--no-extensions", "-ne"], Switch, ARG),
    flag(&["--no-skills", "-ns"], Switch, ARG),
    flag(&["--no-prompt-templates", "-np"], Switch, ARG),
    flag(&["--no-themes"], Switch, ARG),
    flag(&["--no-context-files", "-nc"], Switch, ARG),
    // Inherited only.
    flag(&["--tools", "-t"], Value, KEEP),
    flag(&["--extension", "-e"], Value, PATH),
    flag(&["--skill"], Value, PATH),
    flag(&["--prompt-template"], Value, PATH),
    flag(&["--theme"], Value, PATH),
    // Never inherited.
    flag(&["--api-key"], Value, Skip),
    flag(&["--append-system-prompt"], Value, Skip),
    flag(&["--export"], Value, Skip),
    flag(&["--fork"], Value, Skip),
    flag(&["--mode"], Value, Skip),
    flag(&["--name", "-n"], Value, Skip),
    flag(&["--session"], Value, Skip),
    flag(&["--session-dir"], Value, Skip),
    flag(&["--session-id"], Value, Skip),
    flag(&["--system-prompt"], Value, Skip),
    flag(&["--list-models"], Optional, Skip),
    flag(&["--approve", "-a"], Switch, Skip),
    flag(&["--continue", "-c"], Switch, Skip),
    flag(&["--help", "-h"], Switch, Skip),
    flag(&["--no-approve", "-na"], Switch, Skip),
    flag(&["--print", "-p"], Switch, Skip),
    flag(&["--resume", "-r"], Switch, Skip),
    flag(&["--verbose"], Switch, Skip),
    flag(&["--version", "-v"], Switch, Skip),
    // Unknown to pi-threads' lists.
    flag(&["--use-theme"], Value, Unlisted),
    flag(&["--no-session"], Switch, Unlisted),
    flag(&["--no-mcp"], Switch, Unlisted),
    flag(&["--tui-mode"], Switch, Unlisted),
];

/// The values `--thinking` takes, lowest first (`max` is not cycled through).
pub const THINKING_LEVELS: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];

/// The flag spelled `arg` (exactly, no `=value`).
pub fn find(arg: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.aliases.contains(&arg))
}

/// A child Pi's argv: `prefix` (the Pi invocation), the merged args, `--session <file>` when
/// there is one, `--mode rpc --name <name>`, then `--approve` or `--no-approve`.
pub fn child_argv(
    prefix: &[String],
    merged: &[String],
    session_file: Option<&Path>,
    name: &str,
    approve: bool,
) -> Vec<String> {
    let mut argv = Vec::with_capacity(prefix.len() + merged.len() + 8);
    argv.extend(prefix.iter().cloned());
    argv.extend(merged.iter().cloned());
    if let Some(file) = session_file {
        argv.push("--session".to_string());
        argv.push(file.to_string_lossy().into_owned());
    }
    argv.extend(["--mode", "rpc", "--name", name].map(String::from));
    argv.push(if approve { "--approve" } else { "--no-approve" }.to_string());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn child_argv_order() {
        let argv = child_argv(
            &v(&["node", "/opt/pi/cli.js"]),
            &v(&["--model", "sonnet", "-nt"]),
            Some(Path::new("/s/child.jsonl")),
            "API survey",
            true,
        );
        assert_eq!(
            argv,
            v(&[
                "node",
                "/opt/pi/cli.js",
                "--model",
                "sonnet",
                "-nt",
                "--session",
                "/s/child.jsonl",
                "--mode",
                "rpc",
                "--name",
                "API survey",
                "--approve",
            ])
        );
        assert_eq!(
            child_argv(&v(&["pi"]), &[], None, "n", false),
            v(&["pi", "--mode", "rpc", "--name", "n", "--no-approve"])
        );
    }

    #[test]
    fn every_spelling_is_listed_once() {
        let mut seen = std::collections::HashSet::new();
        for f in FLAGS {
            for a in f.aliases {
                assert!(seen.insert(*a), "{a} twice");
            }
        }
    }
}
