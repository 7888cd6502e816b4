//! Contract A child Pi arguments: the `start.args` allowlist, the flags a child inherits from
//! its parent's argv, how the two merge, and whether the child may run with `--approve`
//! (reference §1.6, §1.7). The flags themselves are `pi::flags`' table, and so is the argv
//! they end up in (`pi::flags::child_argv`).
//!
//! All functions are pure except [`should_approve`] (it reads the filesystem to resolve real
//! paths) and [`inherited_args`] (it reads `HOME` to expand `~` in resource paths).

use std::path::{Component, Path, PathBuf};

use crate::error::Error;
use crate::pi::flags::{self, Arity, Flag, Inherit};

/// Pi's package subcommands, rejected in `start.args`.
const PACKAGE_SUBCOMMANDS: &[&str] =
    &["config", "install", "list", "remove", "uninstall", "update"];

/// Tool names built into Pi; `--no-builtin-tools` removes them from an inherited `--tools`.
pub const BUILTIN_TOOL_NAMES: &[&str] = &["read", "bash", "edit", "write", "grep", "find", "ls"];

/// Resource values with these prefixes are not local paths and are inherited verbatim.
const REMOTE_PREFIXES: &[&str] = &["npm:", "git:", "github:", "http:", "https:", "ssh:"];

/// Child flags that would loosen an inherited `--models` scope.
const MODEL_SCOPE_OVERRIDES: &[&str] = &["--provider", "--model", "--models", "--thinking"];

/// A child restriction flag and the inherited enable flag it drops.
const RESTRICTION_DROPS: &[(&str, &str)] = &[
    ("--no-tools", "--tools"),
    ("--no-extensions", "--extension"),
    ("--no-skills", "--skill"),
    ("--no-prompt-templates", "--prompt-template"),
    ("--no-themes", "--theme"),
];

const ALLOWED_ARGS_HELP: &str = "allowed start.args are safe narrowing flags such as --provider <value>, --model <value>, --models <value>, --thinking <value>, --exclude-tools <value>, --no-tools, --no-builtin-tools, --offline, --no-extensions, --no-skills, --no-prompt-templates, --no-themes, and --no-context-files";

/// A flag a child inherits (`Inherit::Keep`): its table entry, whether `start.args` may carry
/// it, and whether its value is a resource path.
fn kept(arg: &str) -> Option<(&'static Flag, bool, bool)> {
    let f = flags::find(arg)?;
    match f.inherit {
        Inherit::Keep { in_args, path } => Some((f, in_args, path)),
        Inherit::Skip | Inherit::Unlisted => None,
    }
}

/// The canonical name of an inherited flag's spelling.
fn canonical_of(arg: &str) -> Option<&'static str> {
    kept(arg).map(|(f, _, _)| f.canonical())
}

fn takes_value(arg: &str) -> bool {
    kept(arg).is_some_and(|(f, _, _)| f.arity == Arity::Value)
}

/// Starts with `-` but not `---`.
fn is_flag_like(value: &str) -> bool {
    value.starts_with('-') && !value.starts_with("---")
}

fn unsupported(detail: &str, repair: &str) -> Error {
    Error::invalid(format!(
        "Unsupported child Pi arg for pi-threads: {detail}. Repair: {repair}"
    ))
}

/// Checks `start.args` (and `fork.args`) against the allowlist. Accepted: the value flags
/// `--provider --model --models --thinking --exclude-tools/-xt`, each followed by a value that
/// is not flag-like, and the boolean restriction flags. Everything else is rejected with
/// `Unsupported child Pi arg for pi-threads: <arg>. Repair: …`.
///
/// A value is consumed as a value: only flag positions are checked for `=` (as upstream).
pub fn validate_child_args(args: &[String]) -> Result<(), Error> {
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg.contains('=') {
            return Err(unsupported(
                arg,
                "inline --flag=value forms are not allowed; pass flag and value as separate array items, e.g. \"args\": [\"--model\", \"sonnet\"].",
            ));
        }
        if arg == "--" || PACKAGE_SUBCOMMANDS.contains(&arg) || !is_flag_like(arg) {
            return Err(unsupported(
                arg,
                &format!(
                    "remove package subcommands, prompts, and positional args; {ALLOWED_ARGS_HELP}."
                ),
            ));
        }
        let spec = match kept(arg) {
            Some((f, true, _)) => f,
            _ => {
                return Err(unsupported(
                    arg,
                    &format!(
                        "remove this flag or replace it with an allowlisted restriction; {ALLOWED_ARGS_HELP}. Children always run in RPC mode and cannot set session, approval, extension-loading, or one-shot flags through start.args."
                    ),
                ))
            }
        };
        if spec.arity == Arity::Value {
            match args.get(i + 1) {
                Some(v) if !is_flag_like(v) => i += 1,
                _ => {
                    return Err(unsupported(
                        &format!("{arg} requires a value"),
                        &format!(
                            "pass the value as the next array item, e.g. \"args\": [\"{arg}\", \"value\"]."
                        ),
                    ))
                }
            }
        }
        i += 1;
    }
    Ok(())
}

/// The flags a child inherits from its parent's Pi argv (the arguments after the executable;
/// a leading executable path is a positional and is ignored anyway).
///
/// Only the `--flag value` form counts: tokens containing `=` are skipped, and `--` ends the
/// scan. The allowlisted flags plus `--tools/-t`, `--extension/-e`, `--skill`,
/// `--prompt-template` and `--theme` are kept, under their canonical long names. Resource
/// path values (`--extension`, `--skill`, `--prompt-template`, `--theme`) are resolved against
/// `parent_start_cwd` (with `~` and `file://` expanded), except values beginning `npm:`,
/// `git:`, `github:`, `http:`, `https:` or `ssh:`. Session, mode, name, approval, one-shot and
/// secret flags are skipped with their values; an unknown `--flag` swallows a following token
/// that is neither flag-like nor `@…`, as Pi's parser would treat it as that flag's value.
pub fn inherited_args(parent_argv: &[String], parent_start_cwd: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < parent_argv.len() {
        let arg = parent_argv[i].as_str();
        let next = parent_argv.get(i + 1).map(String::as_str);
        i += 1;
        if arg == "--" {
            break;
        }
        if arg.contains('=') {
            continue;
        }
        let swallows = |v: Option<&str>| v.is_some_and(|v| !is_flag_like(v) && !v.starts_with('@'));
        if let Some(f) = flags::find(arg) {
            match f.inherit {
                Inherit::Keep { path, .. } => {
                    if f.arity != Arity::Value {
                        out.push(f.canonical().to_string());
                    } else if let Some(value) = next {
                        out.push(f.canonical().to_string());
                        out.push(if path {
                            resolve_resource_value(value, parent_start_cwd)
                        } else {
                            value.to_string()
                        });
                        i += 1;
                    }
                    continue;
                }
                Inherit::Skip => {
                    match f.arity {
                        Arity::Value if next.is_some() => i += 1,
                        Arity::Optional if swallows(next) => i += 1,
                        _ => {}
                    }
                    continue;
                }
                // Treated like any unknown flag below.
                Inherit::Unlisted => {}
            }
        }
        if arg.starts_with("--") && swallows(next) {
            i += 1;
        }
    }
    out
}

/// A resource flag's value as the child should see it: remote specs verbatim, local paths
/// absolute and lexically normalised against `base`.
fn resolve_resource_value(value: &str, base: &Path) -> String {
    let trimmed = value.trim();
    if REMOTE_PREFIXES.iter().any(|p| trimmed.starts_with(p)) {
        return value.to_string();
    }
    let expanded = expand_cli_path(value);
    let joined = if expanded.is_absolute() {
        expanded
    } else {
        absolute(base).join(expanded)
    };
    normalize_lexically(&joined).to_string_lossy().into_owned()
}

/// `~`, `~/…` and `file://…` expanded; anything else as given.
fn expand_cli_path(value: &str) -> PathBuf {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    if value == "~" {
        if let Some(h) = home() {
            return h;
        }
    } else if let Some(rest) = value.strip_prefix("~/") {
        if let Some(h) = home() {
            return h.join(rest);
        }
    } else if let Some(rest) = value.strip_prefix("file://") {
        let path = rest.strip_prefix("localhost").unwrap_or(rest);
        if path.starts_with('/') {
            return PathBuf::from(percent_decode(path));
        }
    }
    PathBuf::from(value)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// `.` dropped and `..` applied without touching the filesystem (like Node's `path.resolve`).
fn normalize_lexically(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// True when some flag of `args` has one of the canonical `names` (values skipped).
fn has_flag(args: &[String], names: &[&str]) -> bool {
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if canonical_of(arg).is_some_and(|c| names.contains(&c)) {
            return true;
        }
        i += if takes_value(arg) { 2 } else { 1 };
    }
    false
}

/// `args` without every occurrence (and value) of the flags with canonical `names`.
fn remove_flags(args: &[String], names: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let step = if takes_value(arg) { 2 } else { 1 };
        if !canonical_of(arg).is_some_and(|c| names.contains(&c)) {
            out.extend(args[i..(i + step).min(args.len())].iter().cloned());
        }
        i += step;
    }
    out
}

/// The values of every occurrence of the value flag with canonical `name`.
fn flag_values<'a>(args: &'a [String], name: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if takes_value(arg) {
            if canonical_of(arg) == Some(name) {
                if let Some(v) = args.get(i + 1) {
                    out.push(v.as_str());
                }
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    out
}

/// Comma lists joined into one: items trimmed, empties dropped, first occurrence kept.
fn merge_comma_lists<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for value in values {
        for item in value.split(',').map(str::trim) {
            if !item.is_empty() && !out.iter().any(|x| x == item) {
                out.push(item.to_string());
            }
        }
    }
    out
}

/// The merged child args: the child's `args` are validated, then inherited args come first
/// and the child's after them, with these rules:
///
/// - an inherited `--models` scope rejects a child `--provider`, `--model`, `--models` or
///   `--thinking`;
/// - child `--no-tools` drops inherited `--tools`; `--no-extensions` drops `--extension`;
///   `--no-skills` drops `--skill`; `--no-prompt-templates` drops `--prompt-template`;
///   `--no-themes` drops `--theme`;
/// - child `--no-builtin-tools` without `--no-tools` keeps only the non-builtin names of the
///   (last) inherited `--tools` list, re-emitted at the end of the inherited part, or
///   `--no-tools` there when none remain;
/// - when the child passes `--exclude-tools`, the last inherited list and every child list
///   merge into one deduplicated comma list, inherited entries first, emitted once as
///   `--exclude-tools <list>` at the end (all other `--exclude-tools` removed).
pub fn merge_args(inherited: &[String], child: &[String]) -> Result<Vec<String>, Error> {
    validate_child_args(child)?;
    if has_flag(inherited, &["--models"]) && has_flag(child, MODEL_SCOPE_OVERRIDES) {
        return Err(Error::invalid(
            "Unsupported child Pi arg for pi-threads: child model/provider/thinking args cannot override an inherited --models scope. Repair: omit --provider/--model/--models/--thinking from start.args or start the parent with a narrower model scope.",
        ));
    }

    let mut base = inherited.to_vec();
    for (restriction, enable) in RESTRICTION_DROPS {
        if has_flag(child, &[restriction]) {
            base = remove_flags(&base, &[enable]);
        }
    }
    if !has_flag(child, &["--no-tools"]) && has_flag(child, &["--no-builtin-tools"]) {
        if let Some(tools) = flag_values(&base, "--tools").last().copied() {
            let kept: Vec<String> = merge_comma_lists([tools])
                .into_iter()
                .filter(|t| !BUILTIN_TOOL_NAMES.contains(&t.as_str()))
                .collect();
            base = remove_flags(&base, &["--tools"]);
            if kept.is_empty() {
                base.push("--no-tools".to_string());
            } else {
                base.push("--tools".to_string());
                base.push(kept.join(","));
            }
        }
    }

    let child_excludes = flag_values(child, "--exclude-tools");
    if child_excludes.is_empty() {
        base.extend(child.iter().cloned());
        return Ok(base);
    }
    let inherited_exclude = flag_values(&base, "--exclude-tools").last().copied();
    let merged = merge_comma_lists(inherited_exclude.into_iter().chain(child_excludes));
    let mut out = remove_flags(&base, &["--exclude-tools"]);
    out.extend(remove_flags(child, &["--exclude-tools"]));
    if !merged.is_empty() {
        out.push("--exclude-tools".to_string());
        out.push(merged.join(","));
    }
    Ok(out)
}

/// True when the child may run with `--approve`: the parent project is trusted and the
/// child cwd's real path equals or lies inside the parent cwd's real path. A path that
/// cannot be resolved is untrusted, and so is a symlink leading outside the parent. A child
/// cwd in a worktree threadbase made counts as the same place in its project
/// (`worktree::project_dir`), however the child is launched.
pub fn should_approve(parent_trusted: bool, parent_cwd: &Path, child_cwd: &Path) -> bool {
    if !parent_trusted {
        return false;
    }
    match (
        dunce::canonicalize(parent_cwd),
        dunce::canonicalize(child_cwd),
    ) {
        (Ok(parent), Ok(child)) => crate::worktree::project_dir(&child).starts_with(&parent),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
