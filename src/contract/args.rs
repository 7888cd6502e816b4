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
/// cannot be resolved is untrusted, and so is a symlink leading outside the parent.
pub fn should_approve(parent_trusted: bool, parent_cwd: &Path, child_cwd: &Path) -> bool {
    if !parent_trusted {
        return false;
    }
    match (
        dunce::canonicalize(parent_cwd),
        dunce::canonicalize(child_cwd),
    ) {
        (Ok(parent), Ok(child)) => child.starts_with(&parent),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn rejected(args: &[&str]) -> String {
        validate_child_args(&v(args))
            .expect_err(&format!("{args:?} should be rejected"))
            .message
    }

    #[test]
    fn accepts_every_allowlisted_flag() {
        for args in [
            v(&["--provider", "anthropic"]),
            v(&["--model", "anthropic/claude-sonnet-4-5"]),
            v(&["--models", "sonnet,haiku"]),
            v(&["--thinking", "high"]),
            v(&["--exclude-tools", "bash,edit"]),
            v(&["-xt", "bash"]),
            v(&[
                "--no-tools",
                "-nt",
                "--no-builtin-tools",
                "-nbt",
                "--offline",
                "--no-extensions",
                "-ne",
                "--no-skills",
                "-ns",
                "--no-prompt-templates",
                "-np",
                "--no-themes",
                "--no-context-files",
                "-nc",
            ]),
            // A value starting with `---` is not flag-like.
            v(&["--model", "---odd"]),
            // Values are consumed as values, even with `=`.
            v(&["--model", "a=b"]),
            v(&[]),
        ] {
            assert_eq!(validate_child_args(&args), Ok(()), "{args:?}");
        }
    }

    #[test]
    fn rejects_inline_values() {
        let m = rejected(&["--model=opus"]);
        assert!(
            m.starts_with("Unsupported child Pi arg for pi-threads: --model=opus. Repair: inline --flag=value forms are not allowed; pass flag and value as separate array items"),
            "{m}"
        );
        assert!(rejected(&["--offline", "x=y"]).contains("x=y. Repair: inline"));
    }

    #[test]
    fn rejects_positionals_and_subcommands() {
        for arg in [
            "--",
            "config",
            "install",
            "list",
            "remove",
            "uninstall",
            "update",
            "hello",
            "",
            "---x",
            "@file.md",
        ] {
            let m = rejected(&[arg]);
            assert!(
                m.starts_with(&format!(
                    "Unsupported child Pi arg for pi-threads: {arg}. Repair: remove package subcommands, prompts, and positional args; allowed start.args are"
                )),
                "{m}"
            );
        }
        // A stray positional after a boolean flag.
        assert!(rejected(&["--offline", "prompt"]).contains(": prompt. Repair:"));
    }

    #[test]
    fn rejects_other_flags() {
        for arg in [
            "--tools",
            "-t",
            "--extension",
            "-e",
            "--skill",
            "--prompt-template",
            "--theme",
            "--session",
            "--fork",
            "--mode",
            "--print",
            "-p",
            "--approve",
            "--no-approve",
            "--name",
            "--api-key",
            "--unknown",
            "-",
            "-x",
        ] {
            let m = rejected(&[arg, "value"]);
            assert!(
                m.starts_with(&format!(
                    "Unsupported child Pi arg for pi-threads: {arg}. Repair: remove this flag or replace it with an allowlisted restriction; allowed start.args are"
                )),
                "{m}"
            );
            assert!(m.contains("--model <value>") && m.contains("--no-tools"));
        }
    }

    #[test]
    fn rejects_missing_or_flag_like_values() {
        for args in [
            &["--model"][..],
            &["--provider", "--model", "x"],
            &["-xt", "-nt"],
            &["--thinking", "-"],
            &["--models", "--"],
        ] {
            let flag = args[0];
            let m = rejected(args);
            assert_eq!(
                m,
                format!(
                    "Unsupported child Pi arg for pi-threads: {flag} requires a value. Repair: pass the value as the next array item, e.g. \"args\": [\"{flag}\", \"value\"]."
                )
            );
        }
    }

    #[test]
    fn rejected_errors_are_invalid_params() {
        let e = validate_child_args(&v(&["--tools", "read"])).unwrap_err();
        assert_eq!(e.code, crate::error::ErrorCode::InvalidParams);
    }

    #[test]
    fn inherits_allowlisted_and_resource_flags() {
        let base = Path::new("/work/proj");
        let argv = v(&[
            "--model",
            "sonnet",
            "-t",
            "read,bash",
            "-xt",
            "edit",
            "-nc",
            "--offline",
            "-e",
            "ext/a.ts",
            "--skill",
            "../skills/s",
            "--prompt-template",
            "/abs/./p.md",
            "--theme",
            "npm:@x/theme",
            "--extension",
            "git:github.com/a/b",
            "--extension",
            "github:a/b",
            "--extension",
            "https://x.test/e.ts",
            "--extension",
            "http://x.test/e.ts",
            "--extension",
            "ssh:host/e",
            "--extension",
            "file:///opt/my%20ext.ts",
        ]);
        assert_eq!(
            inherited_args(&argv, base),
            v(&[
                "--model",
                "sonnet",
                "--tools",
                "read,bash",
                "--exclude-tools",
                "edit",
                "--no-context-files",
                "--offline",
                "--extension",
                "/work/proj/ext/a.ts",
                "--skill",
                "/work/skills/s",
                "--prompt-template",
                "/abs/p.md",
                "--theme",
                "npm:@x/theme",
                "--extension",
                "git:github.com/a/b",
                "--extension",
                "github:a/b",
                "--extension",
                "https://x.test/e.ts",
                "--extension",
                "http://x.test/e.ts",
                "--extension",
                "ssh:host/e",
                "--extension",
                "/opt/my ext.ts",
            ])
        );
    }

    #[test]
    fn inherited_home_paths_expand() {
        let Some(home) = std::env::var_os("HOME") else {
            return;
        };
        let got = inherited_args(&v(&["--skill", "~/s"]), Path::new("/w"));
        assert_eq!(
            got[1],
            PathBuf::from(home).join("s").to_string_lossy().into_owned()
        );
    }

    #[test]
    fn inherited_ignores_inline_and_never_inherited() {
        let argv = v(&[
            "pi",
            "--model=opus",
            "--api-key",
            "sk-1",
            "--append-system-prompt",
            "x",
            "--export",
            "out.html",
            "--fork",
            "f.jsonl",
            "--mode",
            "json",
            "--name",
            "n",
            "-n",
            "n2",
            "--session",
            "s.jsonl",
            "--session-dir",
            "d",
            "--session-id",
            "id",
            "--system-prompt",
            "sp",
            "--approve",
            "-a",
            "--continue",
            "-c",
            "--help",
            "-h",
            "--no-approve",
            "-na",
            "--print",
            "-p",
            "--resume",
            "-r",
            "--verbose",
            "--version",
            "-v",
            "--thinking",
            "low",
        ]);
        assert_eq!(
            inherited_args(&argv, Path::new("/w")),
            v(&["--thinking", "low"])
        );
    }

    #[test]
    fn inherited_value_skipping_edges() {
        let w = Path::new("/w");
        // --list-models takes a value only when it is neither flag-like nor `@…`.
        assert_eq!(
            inherited_args(&v(&["--list-models", "sonnet", "--offline"]), w),
            v(&["--offline"])
        );
        assert_eq!(
            inherited_args(&v(&["--list-models", "--offline"]), w),
            v(&["--offline"])
        );
        // An unknown long flag swallows a plausible value; unknown short flags do not.
        assert_eq!(
            inherited_args(&v(&["--custom", "--offline", "--custom2", "val", "-x"]), w),
            v(&["--offline"])
        );
        assert_eq!(
            inherited_args(&v(&["--custom", "@prompt.md", "--offline"]), w),
            v(&["--offline"])
        );
        // A skipped value that looks like an allowlisted flag is still skipped.
        assert_eq!(
            inherited_args(&v(&["--name", "--offline"]), w),
            Vec::<String>::new()
        );
        // A value flag at the end has no value: dropped.
        assert_eq!(
            inherited_args(&v(&["--offline", "--model"]), w),
            v(&["--offline"])
        );
        // `--` ends the scan.
        assert_eq!(
            inherited_args(&v(&["--offline", "--", "--model", "x"]), w),
            v(&["--offline"])
        );
        // Positionals are ignored.
        assert_eq!(
            inherited_args(&v(&["fix the bug", "--no-themes"]), w),
            v(&["--no-themes"])
        );
    }

    #[test]
    fn merge_puts_inherited_first() {
        let merged = merge_args(
            &v(&["--model", "sonnet", "--offline"]),
            &v(&["--thinking", "high", "-nc"]),
        )
        .unwrap();
        assert_eq!(
            merged,
            v(&[
                "--model",
                "sonnet",
                "--offline",
                "--thinking",
                "high",
                "-nc"
            ])
        );
        assert_eq!(merge_args(&[], &[]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn merge_validates_child_args() {
        let e = merge_args(&[], &v(&["--tools", "read"])).unwrap_err();
        assert!(e
            .message
            .starts_with("Unsupported child Pi arg for pi-threads: --tools."));
    }

    #[test]
    fn merge_protects_models_scope() {
        let inherited = v(&["--models", "sonnet,haiku"]);
        for child in [
            v(&["--provider", "openai"]),
            v(&["--model", "gpt"]),
            v(&["--models", "gpt"]),
            v(&["--thinking", "high"]),
            v(&["--offline", "--thinking", "off"]),
        ] {
            let e = merge_args(&inherited, &child).unwrap_err();
            assert!(
                e.message.contains(
                    "child model/provider/thinking args cannot override an inherited --models scope. Repair: "
                ),
                "{}",
                e.message
            );
        }
        assert_eq!(
            merge_args(&inherited, &v(&["--offline"])).unwrap(),
            v(&["--models", "sonnet,haiku", "--offline"])
        );
        // Without an inherited --models scope, model overrides are fine.
        assert!(merge_args(&v(&["--model", "a"]), &v(&["--model", "b"])).is_ok());
        // A `--models` text that is a value, not a flag, is no scope.
        assert!(merge_args(&v(&["--tools", "--models"]), &v(&["--model", "b"])).is_ok());
    }

    #[test]
    fn merge_exclude_tools() {
        assert_eq!(
            merge_args(
                &v(&["--exclude-tools", "bash, edit", "--offline"]),
                &v(&[
                    "-xt",
                    "edit,write",
                    "--no-themes",
                    "--exclude-tools",
                    "bash,ls,"
                ]),
            )
            .unwrap(),
            v(&[
                "--offline",
                "--no-themes",
                "--exclude-tools",
                "bash,edit,write,ls"
            ])
        );
        // Only the last inherited list counts (it is the one the parent's Pi applied).
        assert_eq!(
            merge_args(
                &v(&["--exclude-tools", "a", "--exclude-tools", "b"]),
                &v(&["-xt", "c"])
            )
            .unwrap(),
            v(&["--exclude-tools", "b,c"])
        );
        // Child without --exclude-tools: inherited list kept as is.
        assert_eq!(
            merge_args(&v(&["--exclude-tools", "a"]), &v(&["--offline"])).unwrap(),
            v(&["--exclude-tools", "a", "--offline"])
        );
        // Nothing left after merging: no flag at all.
        assert_eq!(
            merge_args(&[], &v(&["-xt", " , "])).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn merge_restrictions_drop_inherited_enables() {
        let inherited = v(&[
            "--tools",
            "read,my_tool",
            "--extension",
            "/e1",
            "--skill",
            "/s1",
            "--prompt-template",
            "/p1",
            "--theme",
            "/t1",
            "--extension",
            "/e2",
            "--offline",
        ]);
        let drop = |child: &[&str], gone: &[&str]| {
            let merged = merge_args(&inherited, &v(child)).unwrap();
            for flag in gone {
                assert!(!merged.iter().any(|a| a == flag), "{child:?} kept {flag}");
            }
            merged
        };
        let m = drop(&["--no-tools"], &["--tools"]);
        assert_eq!(m.last().unwrap(), "--no-tools");
        assert!(!m.contains(&"read,my_tool".to_string()));
        let m = drop(&["-ne"], &["--extension"]);
        assert!(!m.contains(&"/e1".to_string()) && !m.contains(&"/e2".to_string()));
        assert!(m.contains(&"--skill".to_string()));
        drop(&["--no-skills"], &["--skill"]);
        drop(&["-np"], &["--prompt-template"]);
        let m = drop(&["--no-themes"], &["--theme"]);
        assert_eq!(
            m,
            v(&[
                "--tools",
                "read,my_tool",
                "--extension",
                "/e1",
                "--skill",
                "/s1",
                "--prompt-template",
                "/p1",
                "--extension",
                "/e2",
                "--offline",
                "--no-themes",
            ])
        );
        // Restrictions with nothing to drop change nothing else.
        assert_eq!(
            merge_args(&v(&["--offline"]), &v(&["-nt", "-ne"])).unwrap(),
            v(&["--offline", "-nt", "-ne"])
        );
    }

    #[test]
    fn merge_no_builtin_tools_filters_inherited_tools() {
        assert_eq!(
            merge_args(
                &v(&["--tools", "read, my_tool,bash,other,my_tool", "--offline"]),
                &v(&["--no-builtin-tools"]),
            )
            .unwrap(),
            v(&[
                "--offline",
                "--tools",
                "my_tool,other",
                "--no-builtin-tools"
            ])
        );
        assert_eq!(
            merge_args(
                &v(&["--tools", "read,bash,edit,write,grep,find,ls"]),
                &v(&["-nbt"])
            )
            .unwrap(),
            v(&["--no-tools", "-nbt"])
        );
        // With --no-tools as well, --tools is simply dropped.
        assert_eq!(
            merge_args(&v(&["--tools", "my_tool"]), &v(&["-nbt", "-nt"])).unwrap(),
            v(&["-nbt", "-nt"])
        );
        // No inherited --tools: nothing to filter.
        assert_eq!(
            merge_args(&v(&["--offline"]), &v(&["-nbt"])).unwrap(),
            v(&["--offline", "-nbt"])
        );
    }

    #[test]
    fn approval_requires_trust_and_containment() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("proj");
        let inside = parent.join("sub");
        let outside = dir.path().join("other");
        let sibling = dir.path().join("proj2");
        for d in [&inside, &outside, &sibling] {
            std::fs::create_dir_all(d).unwrap();
        }
        assert!(should_approve(true, &parent, &parent));
        assert!(should_approve(true, &parent, &inside));
        assert!(should_approve(true, &parent, &inside.join("..")));
        assert!(!should_approve(false, &parent, &inside));
        assert!(!should_approve(true, &parent, &outside));
        // A string prefix is not containment.
        assert!(!should_approve(true, &parent, &sibling));
        assert!(!should_approve(true, &inside, &parent));
        // Missing paths cannot be resolved: untrusted.
        assert!(!should_approve(true, &parent, &parent.join("missing")));
        assert!(!should_approve(true, &dir.path().join("missing"), &inside));
    }

    #[cfg(unix)]
    #[test]
    fn approval_follows_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("proj");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(parent.join("real")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let escape = parent.join("escape");
        std::os::unix::fs::symlink(&outside, &escape).unwrap();
        assert!(!should_approve(true, &parent, &escape));
        let inner = parent.join("inner");
        std::os::unix::fs::symlink(parent.join("real"), &inner).unwrap();
        assert!(should_approve(true, &parent, &inner));
        // A symlinked parent is compared by its real path.
        let link_parent = dir.path().join("link_proj");
        std::os::unix::fs::symlink(&parent, &link_parent).unwrap();
        assert!(should_approve(true, &link_parent, &parent.join("real")));
    }

    #[test]
    fn lexical_normalisation() {
        assert_eq!(
            normalize_lexically(Path::new("/a/b/../c/./d/")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(normalize_lexically(Path::new("/../x")), PathBuf::from("/x"));
        assert_eq!(percent_decode("/a%20b%zz%2"), "/a b%zz%2");
    }
}
