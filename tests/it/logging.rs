//! Diagnostic logging of a real `threadbase serve`: quiet stderr by default, `THREADBASE_LOG` as
//! the filter, `--log-file` / `THREADBASE_LOG_FILE` for a file beside the database that carries
//! request spans (method, id) and child spans (thread id, pid), and clear errors for bad settings.

use crate::support::serve_client;

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use serve_client::{processes_with_env, Scripted, Serve};

const SCRIPT: &str = r#"{"turns": [{"steps": [{"text": "answer to {prompt}"}]}]}"#;

struct World {
    base: Scripted,
}

fn world() -> World {
    let base = Scripted::new("logging");
    base.script("script", SCRIPT);
    World { base }
}

impl World {
    fn serve(&self, args: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut all_args = vec!["--session-id".to_string(), "ses_logging".into()];
        all_args.extend(args.iter().map(|a| a.to_string()));
        self.base.serve("script", all_args, env)
    }
}

/// Starts a thread, waits for it, sends one request that fails, closes serve; returns serve's pid
/// and stderr, and the thread id.
fn exercise(s: &mut Serve) -> (u32, String, String) {
    let started = s.thread(json!({"action": "start", "prompt": "hello"}));
    let id = started["details"]["thread"]["id"]
        .as_str()
        .or_else(|| started["details"]["id"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no thread id in {started}"));
    s.thread(json!({"action": "wait", "id": id, "timeoutMs": 20000}));
    let bad = s.send("no_such_method", json!({}));
    assert!(s
        .response(bad, Duration::from_secs(20))
        .get("error")
        .is_some());
    let pid = s.child.id();
    assert!(s.close(Duration::from_secs(20)).success());
    let stderr = String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned();
    (pid, stderr, id)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn serve_is_quiet_on_stderr_and_logs_spans_to_a_file_beside_the_database() {
    let w = world();
    let mut s = w.serve(&["--log-file"], &[]);
    let (pid, stderr, thread) = exercise(&mut s);
    assert!(
        stderr.is_empty(),
        "a healthy serve writes nothing to stderr: {stderr}"
    );

    let file = w.base.root.join("threadbase.log");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the log file is private");
    let log = read(&file);
    let serve_span = format!("serve{{pid={pid} session=ses_logging}}");
    assert!(
        log.contains(&format!(
            "{serve_span}: threadbase::cli::serve: serve starting"
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "{serve_span}: threadbase::cli::serve: serve stopped"
        )),
        "{log}"
    );
    // Each request in its span, with the method and the id.
    assert!(
        log.contains(&format!(
            "{serve_span}:request{{method=thread id=1}}: threadbase::serve::server: answered"
        )),
        "{log}"
    );
    assert!(
        log.contains(
            "request{method=no_such_method id=3}: threadbase::serve::server: refused: Unknown method"
        ),
        "{log}"
    );
    // The child in its span, with the thread id and the pid, from start to exit.
    let child_start = log
        .lines()
        .find(|l| l.contains("child started"))
        .unwrap_or_else(|| panic!("no child start in {log}"));
    let child_pid: u32 = child_start
        .split(&format!("child{{thread={thread} pid="))
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no child span in {child_start:?}"));
    assert!(child_pid > 1);
    assert!(
        log.contains(&format!("child{{thread={thread} pid={child_pid}}}: threadbase::runtime: child exited kind=\"stopped\"")),
        "{log}"
    );
    assert!(!log.contains("TRACE"), "the file's default is debug: {log}");

    // A second serve appends to the same file.
    let before = log.lines().count();
    let mut s = w.serve(&["--log-file"], &[]);
    let (pid2, _, _) = exercise(&mut s);
    let log = read(&file);
    assert!(log.lines().count() > before);
    assert!(log.contains(&format!("serve{{pid={pid2} session=ses_logging}}")));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn threadbase_log_sets_the_filter_and_threadbase_log_file_the_file() {
    let w = world();
    let file = w.base.root.join("logs").join("serve.log");
    let file_str = file.display().to_string();
    let mut s = w.serve(
        &[],
        &[
            ("THREADBASE_LOG", "debug"),
            ("THREADBASE_LOG_FILE", &file_str),
        ],
    );
    // The children inherit the file, so their own serves would log there too.
    let started = s.thread(json!({"action": "start", "prompt": "hello"}));
    assert!(started.get("details").is_some());
    assert!(
        !processes_with_env("THREADBASE_LOG_FILE", &file_str).is_empty(),
        "the child's environment names the log file"
    );
    let pid = s.child.id();
    assert!(s.close(Duration::from_secs(20)).success());
    let stderr = String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned();
    assert!(stderr.contains("DEBUG serve{pid="), "{stderr}");
    assert!(
        stderr.contains(":request{method=thread id=1}: threadbase::serve::server: answered"),
        "{stderr}"
    );
    let log = read(&file);
    assert!(
        log.contains(&format!("serve{{pid={pid} session=ses_logging}}")),
        "{log}"
    );
    assert!(log.contains("child started"), "{log}");

    // `info` shows children starting and ending on stderr, not each request.
    let mut s = w.serve(&[], &[("THREADBASE_LOG", "info")]);
    exercise(&mut s);
    let stderr = String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned();
    assert!(
        stderr.contains(" INFO ") && stderr.contains("child started"),
        "{stderr}"
    );
    assert!(!stderr.contains("DEBUG"), "{stderr}");
    // Per target: `threadbase::runtime=info` shows only the runtime's lines.
    let mut s = w.serve(&[], &[("THREADBASE_LOG", "threadbase::runtime=info")]);
    exercise(&mut s);
    let stderr = String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned();
    assert!(
        stderr.contains("threadbase::runtime: child exited"),
        "{stderr}"
    );
    assert!(!stderr.contains("serve starting"), "{stderr}");
}

#[test]
fn bad_log_settings_are_reported() {
    let w = world();
    // An invalid filter: one warning with a Repair: hint, then the defaults.
    let mut s = w.serve(&[], &[("THREADBASE_LOG", "threadbase=loud")]);
    let (_, stderr, _) = exercise(&mut s);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(r#"threadbase: ignoring THREADBASE_LOG="threadbase=loud""#)
            && stderr.contains("Repair:"),
        "{stderr}"
    );

    // A log file that cannot be opened stops serve at start, exit 2, nothing else done.
    let dir = w.base.root.join("a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    for (args, env) in [
        (
            vec!["--log-file".to_string(), dir.display().to_string()],
            vec![],
        ),
        (
            vec![],
            vec![("THREADBASE_LOG_FILE", dir.display().to_string())],
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&w.base.db)
            .arg("serve")
            .args(&args)
            .env_remove("THREADBASE_LOG")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("threadbase: error[io]:")
                && err.contains("Cannot open the log file")
                && err.contains("Repair: pass --log-file with a writable path"),
            "{err}"
        );
    }
}
