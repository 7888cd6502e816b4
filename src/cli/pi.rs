//! `threadbase pi install|uninstall`: registers the bundled Pi extension the way `pi install
//! <dir>` does, so a plain `pi` session has the tools without `-e` or environment variables.
//!
//! The extension's files are compiled into the binary (`include_str!` of `pi-extension/`), so
//! the installed copy always matches the binary that wrote it. Beside them goes
//! `threadbase.json` with this binary's absolute path, which the extension reads to find its
//! server. Registration runs Pi's own `pi install <dir>`; when no `pi` can be run, the settings
//! file is edited exactly as Pi would edit it (a path relative to the settings file's folder in
//! `packages`, matched by resolved path, `JSON.stringify(…, null, 2)` layout).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The extension as shipped: every file of `pi-extension/`, byte for byte.
pub const EXTENSION_FILES: &[(&str, &str)] = &[
    ("index.ts", include_str!("../../pi-extension/index.ts")),
    (
        "commands.ts",
        include_str!("../../pi-extension/commands.ts"),
    ),
    (
        "protocol.ts",
        include_str!("../../pi-extension/protocol.ts"),
    ),
    ("serve.ts", include_str!("../../pi-extension/serve.ts")),
    ("spend.ts", include_str!("../../pi-extension/spend.ts")),
    ("status.ts", include_str!("../../pi-extension/status.ts")),
    ("tools.ts", include_str!("../../pi-extension/tools.ts")),
    (
        "package.json",
        include_str!("../../pi-extension/package.json"),
    ),
    ("README.md", include_str!("../../pi-extension/README.md")),
];

/// The file beside the extension that records which binary installed it.
pub const RECORD_FILE: &str = "threadbase.json";

/// The folder name of the installed package (also Pi's name for it in `pi list`).
const PACKAGE_DIR: &str = "threadbase";

/// Where an install goes: the package folder and the settings file that lists it.
#[derive(Debug, Clone)]
pub struct Target {
    /// `<agent dir>/threadbase` (personal) or `<cwd>/.pi/threadbase` (`--local`).
    pub package_dir: PathBuf,
    /// `<agent dir>/settings.json` or `<cwd>/.pi/settings.json`.
    pub settings: PathBuf,
    pub local: bool,
}

impl Target {
    /// The personal target (Pi's agent dir: `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`) or,
    /// with `local`, the project's `.pi/` under the current directory.
    pub fn resolve(local: bool) -> Result<Target> {
        let base = if local {
            let cwd = std::env::current_dir().map_err(|e| {
                Error::io(format!(
                    "Cannot read the current directory: {e}. Repair: run the command from the project folder."
                ))
            })?;
            cwd.join(".pi")
        } else {
            agent_dir()
        };
        Ok(Target {
            package_dir: base.join(PACKAGE_DIR),
            settings: base.join("settings.json"),
            local,
        })
    }
}

/// Pi's agent dir, as Pi computes it: `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`.
pub fn agent_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PI_CODING_AGENT_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".pi").join("agent")
}

/// How the package was put into the settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Registrar {
    /// Pi's own `pi install` / `pi remove` did it.
    Pi,
    /// No `pi` could be run; threadbase edited the settings file as Pi would.
    Edited,
}

/// `threadbase pi install [--local]`.
pub fn install(local: bool, pi: Option<&str>, out: &mut dyn Write) -> Result<()> {
    let target = Target::resolve(local)?;
    let bin = current_binary()?;
    write_package(&target.package_dir, &bin)?;
    let how = match run_pi(pi, "install", &target)? {
        Some(()) => Registrar::Pi,
        None => {
            edit_settings(&target, true)?;
            Registrar::Edited
        }
    };
    if !settings_lists(&target)? {
        return Err(Error::io(format!(
            "`pi install {}` reported success, but {} does not list the package. Repair: check that file's permissions and run `threadbase pi install{}` again.",
            target.package_dir.display(),
            target.settings.display(),
            if local { " --local" } else { "" }
        )));
    }
    writeln!(
        out,
        "Installed the threadbase Pi extension in {}",
        target.package_dir.display()
    )?;
    writeln!(out, "  binary:   {}", bin.display())?;
    writeln!(
        out,
        "  settings: {} ({})",
        target.settings.display(),
        match how {
            Registrar::Pi => "registered by `pi install`",
            Registrar::Edited => "no `pi` found to run; edited as `pi install` would",
        }
    )?;
    if local {
        writeln!(
            out,
            "  Pi reads a project's packages only once you trust the project."
        )?;
    }
    match child_pi_check() {
        Ok(version) => writeln!(out, "  children: {version}")?,
        Err(why) => writeln!(out, "  warning: {why}")?,
    }
    writeln!(
        out,
        "Start `pi` as usual: the `thread` tool and `/threads` are there. Undo with `threadbase pi uninstall{}`.",
        if local { " --local" } else { "" }
    )?;
    Ok(())
}

/// `threadbase pi uninstall [--local]`.
pub fn uninstall(local: bool, pi: Option<&str>, out: &mut dyn Write) -> Result<()> {
    let target = Target::resolve(local)?;
    let listed = target.settings.exists() && settings_lists(&target)?;
    let ours = target.package_dir.join(RECORD_FILE).is_file();
    if !listed && !ours {
        writeln!(
            out,
            "The threadbase Pi extension is not installed in {} (nothing to do).",
            target.package_dir.display()
        )?;
        return Ok(());
    }
    if listed {
        let removed_by_pi = run_pi(pi, "remove", &target)?.is_some();
        if !removed_by_pi || settings_lists(&target)? {
            edit_settings(&target, false)?;
        }
    }
    if ours {
        std::fs::remove_dir_all(&target.package_dir).map_err(|e| {
            Error::io(format!(
                "Cannot remove {}: {e}. Repair: delete that folder by hand.",
                target.package_dir.display()
            ))
        })?;
    }
    writeln!(
        out,
        "Uninstalled the threadbase Pi extension: removed {} from {}",
        target.package_dir.display(),
        target.settings.display()
    )?;
    Ok(())
}

/// This binary's absolute, symlink-free path.
fn current_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| {
        Error::io(format!(
            "Cannot find this threadbase binary's path: {e}. Repair: run threadbase by its absolute path."
        ))
    })?;
    Ok(dunce::canonicalize(&exe).unwrap_or(exe))
}

/// Writes the extension's files and the binary record into `dir`, each through a temporary
/// file and a rename, so a package is never half-written.
fn write_package(dir: &Path, bin: &Path) -> Result<()> {
    let fail = |what: &Path, e: std::io::Error| {
        Error::io(format!(
            "Cannot write {}: {e}. Repair: check the folder's permissions, or set PI_CODING_AGENT_DIR to a writable agent dir.",
            what.display()
        ))
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
    let record = serde_json::json!({
        "bin": bin.to_string_lossy(),
        "version": env!("CARGO_PKG_VERSION"),
    });
    let record = serde_json::to_string_pretty(&record)? + "\n";
    let files = EXTENSION_FILES
        .iter()
        .map(|(name, text)| (*name, text.as_bytes()))
        .chain(std::iter::once((RECORD_FILE, record.as_bytes())));
    for (name, bytes) in files {
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, bytes).map_err(|e| fail(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| fail(&path, e))?;
    }
    Ok(())
}

/// Runs `pi install|remove <dir>` (`-l --approve` for a project: the user asked for `--local`,
/// which is the approval Pi wants for editing project settings). `Ok(None)` when no `pi` could
/// be started; an error when Pi ran and failed.
fn run_pi(pi: Option<&str>, verb: &str, target: &Target) -> Result<Option<()>> {
    let program: OsString = pi.map(OsString::from).unwrap_or_else(|| "pi".into());
    let mut cmd = Command::new(&program);
    cmd.arg(verb);
    if target.local {
        cmd.args(["-l", "--approve"]);
    }
    cmd.arg(&target.package_dir);
    let output = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && pi.is_none() => return Ok(None),
        Err(e) => {
            return Err(Error::io(format!(
                "Cannot run {}: {e}. Repair: pass --pi with the path of Pi's `pi` command, or omit it to edit the settings file directly.",
                program.to_string_lossy()
            )))
        }
    };
    if output.status.success() {
        return Ok(Some(()));
    }
    let text = String::from_utf8_lossy(&output.stderr).trim().to_string();
    let text = if text.is_empty() {
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    } else {
        text
    };
    // `pi remove` of a package Pi does not list: nothing to undo there.
    if verb == "remove" && text.contains("No matching package") {
        return Ok(Some(()));
    }
    Err(Error::io(format!(
        "`{} {verb} {}` failed ({}): {text}. Repair: fix what Pi reports, or run without `pi` on PATH to have threadbase edit {} directly.",
        program.to_string_lossy(),
        target.package_dir.display(),
        output.status,
        target.settings.display()
    )))
}

/// The `packages` entries of the settings file (strings or `{source, …}` objects).
fn read_settings(path: &Path) -> Result<Map<String, Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => {
            return Err(Error::io(format!(
                "Cannot read {}: {e}. Repair: check the file's permissions.",
                path.display()
            )))
        }
    };
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) | Err(_) => Err(Error::invalid(format!(
            "{} is not a JSON object, so it was left as it is. Repair: fix the file (Pi reads the same file), then run the command again.",
            path.display()
        ))),
    }
}

fn entry_source(entry: &Value) -> Option<&str> {
    match entry {
        Value::String(s) => Some(s),
        Value::Object(m) => m.get("source").and_then(Value::as_str),
        _ => None,
    }
}

/// Whether a `packages` entry names `dir`: Pi identifies local packages by resolved path, a
/// relative one resolved against the settings file's folder.
fn names_dir(entry: &Value, base: &Path, dir: &Path) -> bool {
    let Some(source) = entry_source(entry) else {
        return false;
    };
    if ["npm:", "git:", "github:", "http:", "https:", "ssh:"]
        .iter()
        .any(|p| source.starts_with(p))
    {
        return false;
    }
    let resolved = normalize(&base.join(source));
    resolved == normalize(dir)
}

/// Lexical normalisation (`.` and `..` removed), as Node's `path.resolve` does.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn settings_base(target: &Target) -> &Path {
    target.settings.parent().unwrap_or(Path::new("."))
}

fn settings_lists(target: &Target) -> Result<bool> {
    let settings = read_settings(&target.settings)?;
    let base = settings_base(target);
    Ok(settings
        .get("packages")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|e| names_dir(e, base, &target.package_dir))))
}

/// Adds (or removes) the package in the settings file as Pi's package manager does: the
/// source is the path relative to the settings folder (`.` for the folder itself), a matching
/// entry is rewritten in place, a new one is appended, and the file is written as
/// `JSON.stringify(settings, null, 2)`.
fn edit_settings(target: &Target, add: bool) -> Result<()> {
    let mut settings = read_settings(&target.settings)?;
    let base = settings_base(target).to_path_buf();
    let source = pathdiff::diff_paths(&target.package_dir, &base)
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| ".".to_string());
    let mut packages: Vec<Value> = settings
        .get("packages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let at = packages
        .iter()
        .position(|e| names_dir(e, &base, &target.package_dir));
    match (add, at) {
        (true, Some(i)) => {
            let entry = &mut packages[i];
            match entry {
                Value::Object(m) => {
                    m.insert("source".into(), Value::String(source));
                }
                _ => *entry = Value::String(source),
            }
        }
        (true, None) => packages.push(Value::String(source)),
        (false, _) => packages.retain(|e| !names_dir(e, &base, &target.package_dir)),
    }
    settings.insert("packages".into(), Value::Array(packages));
    std::fs::create_dir_all(&base).map_err(|e| {
        Error::io(format!(
            "Cannot create {}: {e}. Repair: check the folder's permissions.",
            base.display()
        ))
    })?;
    let text = serde_json::to_string_pretty(&Value::Object(settings))?;
    let tmp = base.join(".settings.json.threadbase.tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &target.settings))
        .map_err(|e| {
            Error::io(format!(
                "Cannot write {}: {e}. Repair: check the file's permissions.",
                target.settings.display()
            ))
        })
}

/// Whether the children `serve` will start can run: the argv prefix of
/// `THREADBASE_PI_COMMAND`, else `pi`, must be an executable program. `Ok` carries what was
/// found; `Err` the warning with its repair.
pub fn child_pi_check() -> std::result::Result<String, String> {
    let argv = pi_command_from_env().map_err(|e| e.message)?;
    check_child_command(&argv)
}

/// [`child_pi_check`] for a given argv prefix.
pub fn check_child_command(argv: &[String]) -> std::result::Result<String, String> {
    let program = argv.first().cloned().unwrap_or_else(|| "pi".to_string());
    match find_program(&program) {
        Some(path) => Ok(format!(
            "child Pi command {} found at {}",
            crate::paths::json_quote(&program),
            path.display()
        )),
        None => Err(format!(
            "the child Pi command {} is not an executable program{}, so threads cannot start. Repair: install Pi (`npm install -g @earendil-works/pi-coding-agent`), or set THREADBASE_PI_COMMAND to a JSON argv that starts it, e.g. [\"node\", \"/path/to/pi-coding-agent/dist/bundle/cli.js\"].",
            crate::paths::json_quote(&program),
            if program.contains('/') { "" } else { " on PATH" }
        )),
    }
}

/// `program` if it names an executable file directly, else the first executable
/// `<PATH entry>/<program>`.
pub fn find_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| executable(p))
}

/// The argv prefix that launches a child Pi: `THREADBASE_PI_COMMAND` (a JSON array of
/// strings), else `["pi"]`.
pub fn pi_command_from_env() -> Result<Vec<String>> {
    let set = std::env::var("THREADBASE_PI_COMMAND").ok();
    let pi_command: Vec<String> = match set.filter(|v| !v.is_empty()) {
        Some(json) => serde_json::from_str(&json).map_err(|e| {
            Error::invalid(format!(
                "THREADBASE_PI_COMMAND must be a JSON array of strings ({e}). Repair: set it like '[\"pi\"]' or '[\"/usr/bin/node\",\"/path/to/cli.js\"]'."
            ))
        })?,
        None => vec!["pi".to_string()],
    };
    if pi_command.is_empty() {
        return Err(Error::invalid(
            "THREADBASE_PI_COMMAND is an empty array. Repair: set it like '[\"pi\"]'.",
        ));
    }
    Ok(pi_command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_matched_by_resolved_path() {
        let base = Path::new("/a/agent");
        let dir = Path::new("/a/agent/threadbase");
        assert!(names_dir(&Value::from("threadbase"), base, dir));
        assert!(names_dir(&Value::from("./threadbase"), base, dir));
        assert!(names_dir(&Value::from("../agent/threadbase"), base, dir));
        assert!(names_dir(&Value::from("/a/agent/threadbase"), base, dir));
        assert!(names_dir(
            &serde_json::json!({"source": "threadbase", "skills": []}),
            base,
            dir
        ));
        assert!(!names_dir(&Value::from("npm:threadbase"), base, dir));
        assert!(!names_dir(&Value::from("other"), base, dir));
    }
}
