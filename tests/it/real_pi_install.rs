//! `threadbase pi install` with real Pi 1.6: after the one command, a plain `pi` session (no
//! `-e`, no THREADBASE_* variables) offers the `thread` tool and its calls work end to end; after
//! `threadbase pi uninstall` the tool is gone. Without a `pi` to run, the settings file is
//! written byte for byte as `pi install` writes it. Without any threadbase binary to find, the
//! tool error says what to run. Skips without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::pi_child;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use fake_llm::{hermetic_pi_env, FakeLlm, PiEnv, Step};
use pi_child::{extension_dir, magic_word_fake, parent_pi_or_skip, sql, tool_ends, PiChild};
use serde_json::{json, Value};

const RUN_TIMEOUT: Duration = Duration::from_secs(120);
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(20);
/// The line the tool adds under "Available tools" in the system prompt (Pi writes the tool's
/// name before the snippet, so the snippet does not repeat it).
const SNIPPET: &str = "- thread: run background Pi child sessions";

/// A hermetic env whose PATH holds a `pi` (a wrapper around the test's Pi argv) and the system
/// folders, and no threadbase; extension discovery is left on (the plain session).
fn plain_env(fake: &FakeLlm, pi: &[String]) -> PiEnv {
    let mut env = hermetic_pi_env(fake);
    env.args.retain(|a| a != "--no-extensions");
    let bin = env.root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let quoted: Vec<String> = pi
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    let wrapper = bin.join("pi");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec {} \"$@\"\n", quoted.join(" ")),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    set_path(&mut env, &format!("{}:/usr/bin:/bin", bin.display()));
    env
}

fn set_path(env: &mut PiEnv, path: &str) {
    for (k, v) in env.env.iter_mut() {
        if k == "PATH" {
            *v = path.to_string();
        }
    }
}

/// `threadbase <args>` in the env (its HOME, agent dir and PATH), from `cwd`.
fn threadbase(env: &PiEnv, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .args(args)
        .env_clear()
        .envs(env.env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .output()
        .expect("run threadbase")
}

fn ok(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{text}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Every file of `pi-extension/` is in `dir`, byte for byte, plus the binary record.
fn assert_installed_copy(dir: &Path) {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(extension_dir()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        assert_eq!(
            std::fs::read(entry.path()).unwrap(),
            std::fs::read(dir.join(&name)).unwrap_or_default(),
            "{name} differs from pi-extension/{name}"
        );
        names.push(name);
    }
    names.push("threadbase.json".into());
    names.sort();
    let mut installed: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    installed.sort();
    assert_eq!(installed, names);
    let record = read_json(&dir.join("threadbase.json"));
    let bin = std::fs::canonicalize(env!("CARGO_BIN_EXE_threadbase")).unwrap();
    assert_eq!(record["bin"], bin.display().to_string(), "{record}");
}

fn system_prompt(request: &fake_llm::RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .map(|m| fake_llm::content_text(&m["content"]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Closes the parent's stdin; the parent, its serve and the children must all go away.
fn shut_down(mut parent: PiChild, env: &PiEnv) {
    parent.finish(Duration::from_secs(10));
    let left = env.leftovers_after(CLEANUP_TIMEOUT);
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[test]
fn after_pi_install_a_plain_pi_session_has_the_thread_tool_and_after_uninstall_it_is_gone() {
    let test =
        "after_pi_install_a_plain_pi_session_has_the_thread_tool_and_after_uninstall_it_is_gone";
    let Some((pi, _serial)) = parent_pi_or_skip(test) else {
        return;
    };
    let fake = magic_word_fake([Step::text("Done.")]);
    let env = plain_env(&fake, &pi);
    let settings_before = read_json(&env.agent_dir.join("settings.json"));

    // --- the one command --------------------------------------------------------------------
    let text = ok(&threadbase(&env, &env.cwd, &["pi", "install"]));
    let package = env.agent_dir.join("threadbase");
    assert!(text.contains("registered by `pi install`"), "{text}");
    assert!(
        text.contains(&package.display().to_string()),
        "names the folder: {text}"
    );
    assert!(text.contains("children: child Pi command"), "{text}");
    assert_installed_copy(&package);
    let settings = read_json(&env.agent_dir.join("settings.json"));
    assert_eq!(settings["packages"], json!(["threadbase"]), "{settings}");
    for key in ["retry", "compaction", "enableInstallTelemetry"] {
        assert_eq!(settings[key], settings_before[key], "{key} kept");
    }
    // Installing again changes nothing.
    ok(&threadbase(&env, &env.cwd, &["pi", "install"]));
    assert_eq!(read_json(&env.agent_dir.join("settings.json")), settings);

    // --- a plain pi session: no -e, no THREADBASE_* ------------------------------------------
    let session = env.root.path().join("sessions").join("parent.jsonl");
    let session_arg = session.display().to_string();
    let mut parent = PiChild::spawn(&pi, &env, &["--session", &session_arg], &[]);
    let events = parent.run(
        "p1",
        "Use a background thread to find the magic word.",
        RUN_TIMEOUT,
    );
    let dump = parent.dump();
    let ends = tool_ends(&events, "thread");
    assert_eq!(ends.len(), 2, "{dump}");
    for end in &ends {
        assert_eq!(end["isError"], false, "{end}\n{dump}");
    }
    assert_eq!(ends[0]["result"]["details"]["kind"], "started", "{dump}");
    assert_eq!(ends[1]["result"]["details"]["kind"], "waited", "{dump}");
    assert_eq!(ends[1]["result"]["details"]["timedOut"], false, "{dump}");
    assert!(
        fake_llm::content_text(&ends[1]["result"]["content"]).contains("xyzzy"),
        "{dump}"
    );
    let first = fake
        .completion_requests()
        .into_iter()
        .find(|r| r.step == Some(0))
        .expect("the parent's first request");
    assert!(
        first.tool_names().iter().any(|t| t == "thread"),
        "{:?}",
        first.tool_names()
    );
    let tool = first.json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "thread")
        .cloned()
        .unwrap();
    let description = tool["function"]["description"].as_str().unwrap();
    assert!(
        description.starts_with("Start and manage background Pi child sessions"),
        "{description}"
    );
    for action in [
        "start", "wait", "poll", "send", "stop", "resume", "fork", "list", "archive",
    ] {
        assert!(
            description.contains(&format!("- {action} {{"))
                || description.contains(&format!("; {action} {{"))
                || description.contains(&format!(", {action} {{")),
            "the description teaches {action}: {description}"
        );
    }
    let system = system_prompt(&first);
    assert!(
        system.contains(SNIPPET) && !system.contains("thread: thread:"),
        "promptSnippet in the system prompt, once named:\n{system}"
    );
    assert!(
        system.contains("poll with detail \"full\""),
        "promptGuidelines in the system prompt:\n{system}"
    );
    // The serve used the default database in the agent dir, found through the record.
    let db = env.agent_dir.join("threadbase.sqlite");
    let rows = sql(&db, "SELECT path, status FROM threads ORDER BY path");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["path"], "/root/magic");
    shut_down(parent, &env);

    // --- uninstall -------------------------------------------------------------------------
    let text = ok(&threadbase(&env, &env.cwd, &["pi", "uninstall"]));
    assert!(text.contains("Uninstalled"), "{text}");
    assert!(!package.exists());
    let settings = read_json(&env.agent_dir.join("settings.json"));
    assert_eq!(settings["packages"], json!([]), "{settings}");
    let text = ok(&threadbase(&env, &env.cwd, &["pi", "uninstall"]));
    assert!(text.contains("not installed"), "{text}");

    fake.push(Step::text("No thread tool here."));
    let seen = fake.completion_requests().len();
    let mut parent = PiChild::spawn(&pi, &env, &["--no-session"], &[]);
    parent.run("p2", "Which tools do you have?", RUN_TIMEOUT);
    let after = fake.completion_requests();
    let request = after.get(seen).expect("a request after uninstall");
    assert!(
        !request.tool_names().iter().any(|t| t == "thread"),
        "{:?}",
        request.tool_names()
    );
    assert!(!system_prompt(request).contains(SNIPPET));
    shut_down(parent, &env);
}

#[test]
fn without_pi_to_run_install_writes_the_settings_exactly_as_pi_install_does() {
    let Some((pi, _serial)) = parent_pi_or_skip(
        "without_pi_to_run_install_writes_the_settings_exactly_as_pi_install_does",
    ) else {
        return;
    };
    let fake = FakeLlm::start();
    // One env registers through Pi, the other finds no `pi`; both start from the same settings
    // with an unrelated package already listed, personal and project scope.
    let with_pi = plain_env(&fake, &pi);
    let mut without_pi = plain_env(&fake, &pi);
    set_path(&mut without_pi, "/usr/bin:/bin");
    let mut results = Vec::new();
    for env in [&with_pi, &without_pi] {
        let other = env.root.path().join("other-package");
        std::fs::create_dir_all(&other).unwrap();
        let mut settings = read_json(&env.agent_dir.join("settings.json"));
        settings["packages"] = json!(["../other-package"]);
        std::fs::write(
            env.agent_dir.join("settings.json"),
            serde_json::to_string_pretty(&settings).unwrap(),
        )
        .unwrap();
        let project = env.root.path().join("project");
        std::fs::create_dir_all(project.join(".pi")).unwrap();
        let personal = ok(&threadbase(env, &env.cwd, &["pi", "install"]));
        let local = ok(&threadbase(env, &project, &["pi", "install", "--local"]));
        assert_installed_copy(&env.agent_dir.join("threadbase"));
        assert_installed_copy(&project.join(".pi").join("threadbase"));
        let installed = (
            std::fs::read_to_string(env.agent_dir.join("settings.json")).unwrap(),
            std::fs::read_to_string(project.join(".pi").join("settings.json")).unwrap(),
        );
        ok(&threadbase(env, &env.cwd, &["pi", "uninstall"]));
        ok(&threadbase(env, &project, &["pi", "uninstall", "--local"]));
        assert!(!project.join(".pi").join("threadbase").exists());
        let removed = (
            std::fs::read_to_string(env.agent_dir.join("settings.json")).unwrap(),
            std::fs::read_to_string(project.join(".pi").join("settings.json")).unwrap(),
        );
        results.push((personal, local, installed, removed));
    }
    let (pi_personal, pi_local, pi_installed, pi_removed) = &results[0];
    let (ed_personal, ed_local, ed_installed, ed_removed) = &results[1];
    assert!(
        pi_personal.contains("registered by `pi install`"),
        "{pi_personal}"
    );
    assert!(
        pi_local.contains("registered by `pi install`"),
        "{pi_local}"
    );
    assert!(
        ed_personal.contains("edited as `pi install` would"),
        "{ed_personal}"
    );
    assert!(
        ed_local.contains("edited as `pi install` would"),
        "{ed_local}"
    );
    assert!(
        ed_personal
            .contains("warning: the child Pi command \"pi\" is not an executable program on PATH"),
        "{ed_personal}"
    );
    assert!(ed_personal.contains("Repair:"), "{ed_personal}");
    assert_eq!(
        ed_installed, pi_installed,
        "installed settings, byte for byte"
    );
    assert_eq!(
        ed_removed, pi_removed,
        "settings after uninstall, byte for byte"
    );
    let personal: Value = serde_json::from_str(&pi_installed.0).unwrap();
    assert_eq!(
        personal["packages"],
        json!(["../other-package", "threadbase"])
    );
    let project: Value = serde_json::from_str(&pi_installed.1).unwrap();
    assert_eq!(project["packages"], json!(["threadbase"]));
}

#[test]
fn with_no_threadbase_binary_to_find_the_tool_error_says_what_to_run() {
    let Some((pi, _serial)) =
        parent_pi_or_skip("with_no_threadbase_binary_to_find_the_tool_error_says_what_to_run")
    else {
        return;
    };
    let fake = FakeLlm::with_script([
        Step::tool_call("thread", json!({"action": "list"})),
        Step::text("Done."),
    ]);
    let env = plain_env(&fake, &pi);
    // The extension straight from the repo: no threadbase.json beside it, no THREADBASE_BIN,
    // no threadbase on PATH, a HOME without ~/.cargo.
    let ext = extension_dir().join("index.ts");
    let ext_arg = ext.display().to_string();
    let mut parent = PiChild::spawn(&pi, &env, &["--no-session", "-e", &ext_arg], &[]);
    let events = parent.run("p1", "List the threads.", RUN_TIMEOUT);
    let ends = tool_ends(&events, "thread");
    assert_eq!(ends.len(), 1, "{}", parent.dump());
    assert_eq!(ends[0]["isError"], true, "{}", ends[0]);
    let text = fake_llm::content_text(&ends[0]["result"]["content"]);
    assert!(
        text.starts_with("Cannot find the threadbase binary"),
        "{text}"
    );
    assert!(
        text.contains("cargo install --locked --path .")
            && text.contains("threadbase pi install")
            && text.contains("THREADBASE_BIN"),
        "{text}"
    );
    let cargo_bin: PathBuf = env.home.join(".cargo").join("bin").join("threadbase");
    assert!(text.contains(&cargo_bin.display().to_string()), "{text}");
    shut_down(parent, &env);
}
