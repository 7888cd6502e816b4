//! The pages stay true: every command the README shows in a shell block runs, and every
//! relative link between the Markdown pages (README, docs/, CONTRIBUTING, ARCHITECTURE, the
//! extension's README) leads to a file, and to a heading where it names one.
//!
//! The README's commands run in its order, each with `sh -c` in one temporary folder, with
//! `threadbase` on `PATH` being the binary under test, `HOME` and `PI_CODING_AGENT_DIR` in that
//! folder, no `pi` on `PATH` (so `threadbase pi install` edits the temporary settings file as it
//! does without Pi), and none of serve's settings inherited. A command the test does not list
//! in [`KNOWN`] fails it, so a new example in the README needs a line here.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::serve_env;

/// What the test does with a command the README shows.
enum How {
    /// Runs the line as it is.
    Run,
    /// `export NAME=VALUE`: the commands after it get the variable (the value as written).
    Export,
    /// Runs another command line instead, for the reason given.
    Instead(&'static str, &'static str),
    /// Not run, for the reason given.
    NotRun(&'static str),
}

/// The README's test command; `.ci/run` must run exactly this line.
const TEST_COMMAND: &str = "cargo test --locked";

/// Every command the README's shell blocks show (the line without its `# comment`).
const KNOWN: &[(&str, How)] = &[
    (
        "cargo run --release -- demo",
        How::Instead(
            "threadbase demo",
            "a release build takes minutes; this runs the same `demo` of the binary cargo built for the tests",
        ),
    ),
    (
        TEST_COMMAND,
        How::NotRun("it is the command running this test; .ci/run runs it (checked below)"),
    ),
    (
        "cargo install --locked --path .",
        How::NotRun("a release build into ~/.cargo/bin; the tests use the binary cargo built for them"),
    ),
    ("threadbase pi install", How::Run),
    (
        "pi",
        How::NotRun("an interactive Pi session (the real_pi_* tests drive Pi with the extension)"),
    ),
    ("threadbase demo --keep demo.sqlite", How::Run),
    ("export THREADBASE_DB=demo.sqlite", How::Export),
    ("threadbase tree", How::Run),
    ("threadbase list --state closed --match '/root/api_*'", How::Run),
    ("threadbase show /root/api_survey", How::Run),
    ("threadbase events api_survey", How::Run),
    ("threadbase usage /root/api_survey", How::Run),
    (
        "threadbase sql \"SELECT path, status, phase, exit_kind FROM thread_tree\"",
        How::Run,
    ),
    ("threadbase check", How::Run),
    (
        "threadbase --db demo.sqlite web",
        How::NotRun("a server that runs until stopped; tests/it/web.rs `the_demo_tree_shows_on_the_page` opens the demo's database with `threadbase web` in headless Chromium"),
    ),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The commands of a page's ```sh blocks, in order: comment lines and blank lines left out, a
/// trailing `# comment` cut, lines ending in `\` joined with the next.
fn shell_commands(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in page.lines() {
        let fence = line.trim_start();
        if let Some(info) = fence.strip_prefix("```") {
            in_sh = !in_sh && matches!(info.trim(), "sh" | "bash" | "shell" | "console");
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = strip_comment(line);
        if let Some(head) = code.strip_suffix('\\') {
            pending.push_str(head.trim());
            pending.push(' ');
            continue;
        }
        pending.push_str(code.trim());
        let command = std::mem::take(&mut pending).trim().to_string();
        if !command.is_empty() {
            out.push(command);
        }
    }
    assert!(!in_sh, "an unterminated shell block");
    out
}

/// `line` without a `#` comment that starts outside quotes after whitespace (or at the start).
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev_space => return line[..i].trim_end(),
            _ => {}
        }
        prev_space = c.is_whitespace();
    }
    line.trim_end()
}

/// `PATH` with the tested binary's folder first and every folder that holds a `pi` left out.
fn path_without_pi(bin_dir: &Path) -> std::ffi::OsString {
    let mut dirs = vec![bin_dir.to_path_buf()];
    let current = std::env::var_os("PATH").unwrap_or_default();
    dirs.extend(std::env::split_paths(&current).filter(|d| !d.join("pi").exists()));
    std::env::join_paths(dirs).unwrap()
}

#[test]
fn every_command_in_the_readme_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let commands = shell_commands(&readme);
    let known: HashMap<&str, &How> = KNOWN.iter().map(|(c, h)| (*c, h)).collect();
    let unknown: Vec<&String> = commands
        .iter()
        .filter(|c| !known.contains_key(c.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "the README shows commands this test does not know; add each to KNOWN (run it, or say why not): {unknown:#?}"
    );
    let shown: BTreeSet<&str> = commands.iter().map(String::as_str).collect();
    let stale: Vec<&str> = KNOWN
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| !shown.contains(c))
        .collect();
    assert!(
        stale.is_empty(),
        "KNOWN lists commands the README no longer shows: {stale:#?}"
    );

    // The README's test command is the one CI runs.
    assert!(shown.contains(TEST_COMMAND));
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == TEST_COMMAND),
        ".ci/run does not run the README's test command `{TEST_COMMAND}`:\n{ci}"
    );

    let dir = tempfile::tempdir().unwrap();
    let bin_dir = dir.path().join("bin");
    let work = dir.path().join("work");
    let home = dir.path().join("home");
    let agent = home.join(".pi/agent");
    for d in [&bin_dir, &work, &agent] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_threadbase"), bin_dir.join("threadbase"))
        .unwrap();
    let path = path_without_pi(&bin_dir);
    let mut exported: Vec<(String, String)> = Vec::new();
    let mut ran = Vec::new();
    for command in &commands {
        let line = match known[command.as_str()] {
            How::Run => command.as_str(),
            How::Instead(line, why) => {
                eprintln!("README command `{command}`: running `{line}` instead: {why}");
                line
            }
            How::NotRun(why) => {
                eprintln!("README command `{command}`: not run: {why}");
                continue;
            }
            How::Export => {
                let (name, value) = command
                    .strip_prefix("export ")
                    .and_then(|a| a.split_once('='))
                    .unwrap_or_else(|| panic!("not an `export NAME=VALUE` line: {command}"));
                exported.push((name.to_string(), value.to_string()));
                continue;
            }
        };
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(line)
            .current_dir(&work)
            .stdin(Stdio::null())
            .env("PATH", &path)
            .env("HOME", &home)
            .env("PI_CODING_AGENT_DIR", &agent)
            .env("TMPDIR", dir.path())
            .env_remove("THREADBASE_PI_COMMAND")
            .env_remove("THREADBASE_TOOLS")
            .env_remove("THREADBASE_BUDGET_TOKENS")
            .env_remove("THREADBASE_BUDGET_USD");
        for name in serve_env::INHERITED {
            cmd.env_remove(name);
        }
        for (name, value) in &exported {
            cmd.env(name, value);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "README command `{command}` (ran `{line}`) exited with {}:\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran.push((
            command.clone(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
    }

    // What the commands did is what the README says they do.
    let output_of = |c: &str| {
        &ran.iter()
            .find(|(r, _)| r == c)
            .unwrap_or_else(|| panic!("`{c}` did not run"))
            .1
    };
    assert!(output_of("threadbase pi install").contains("Installed the threadbase Pi extension"));
    let settings = std::fs::read_to_string(agent.join("settings.json")).unwrap();
    assert!(
        settings.contains("threadbase"),
        "pi install did not register the package in the temporary settings.json: {settings}"
    );
    assert!(agent.join("threadbase/threadbase.json").exists());
    assert!(work.join("demo.sqlite").exists());
    assert!(output_of("threadbase tree").contains("/root/api_survey/check_examples"));
    assert!(output_of("threadbase show /root/api_survey").contains("api_survey"));
    assert!(output_of("threadbase check").contains("ok: no problems found"));
}

/// The Markdown pages whose links are checked.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = [
        "README.md",
        "CONTRIBUTING.md",
        "ARCHITECTURE.md",
        "pi-extension/README.md",
    ]
    .iter()
    .map(|p| root().join(p))
    .collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// A page's text outside code blocks and inline code.
fn prose(page: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Inline code spans hold no links.
        for (i, piece) in line.split('`').enumerate() {
            if i % 2 == 0 {
                out.push_str(piece);
            }
        }
        out.push('\n');
    }
    out
}

/// The targets of `[text](target)` links and `[label]: target` definitions.
fn link_targets(prose: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = prose;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                out.push(after[..end].trim().to_string());
                rest = &after[end..];
            }
            None => break,
        }
    }
    for line in prose.lines() {
        let line = line.trim_start();
        if let Some(close) = line.strip_prefix('[').and_then(|l| l.find("]: ")) {
            out.push(line[close + 4..].trim().to_string());
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces as
/// `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings.
fn anchors(page: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_code = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_link_between_the_pages_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in link_targets(&prose(&text)) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !resolved.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                let target_text = std::fs::read_to_string(&resolved).unwrap_or_default();
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{}: {target} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 20, "expected the pages' links, checked {checked}");
}

#[test]
fn every_docs_page_is_in_the_index() {
    let index = std::fs::read_to_string(root().join("docs/README.md")).unwrap();
    for page in pages() {
        if page.parent() != Some(&root().join("docs")) {
            continue;
        }
        let name = page.file_name().unwrap().to_str().unwrap();
        if name == "README.md" {
            continue;
        }
        assert!(
            index.contains(&format!("]({name})")),
            "docs/README.md does not link {name}"
        );
    }
}

#[test]
fn the_shell_block_reader_cuts_comments_and_joins_lines() {
    let page = "text\n```sh\n# a comment\nthreadbase sql \"SELECT '#x'\"   # why\n\na \\\n  b\n```\n```json\n{}\n```\n";
    assert_eq!(
        shell_commands(page),
        vec!["threadbase sql \"SELECT '#x'\"", "a b"]
    );
    assert_eq!(slug("`threadbase top`"), "threadbase-top");
    assert_eq!(
        slug("Contract B: the subagent lifecycle, `agent_*` (`a/b-c`)"),
        "contract-b-the-subagent-lifecycle-agent_-ab-c"
    );
}
