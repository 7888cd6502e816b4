//! `threadbase demo`: the main job on an embedded default. A temporary database and the
//! built-in scripted agent stand in for real Pi; a small tree of threads is started, sent to,
//! waited on, stopped, resumed, forked and archived through the same engine `serve` runs, then
//! printed as a tree with recent events and one SQL query.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use crate::engine::{Engine, ServeConfig, Settings};
use crate::error::Result;
use crate::runtime::{Runtime, RuntimeConfig};
use crate::Store;

/// The scripted model: each child answers after a short "thinking" pause, with one tool call.
const SCRIPT: &str = r#"{
  "turns": [
    {"steps": [
      {"delay_ms": 120},
      {"tool": "bash", "args": {"command": "grep -rn 'pub fn' src | wc -l"}, "result": "42\n"},
      {"text": "Surveyed ({prompt}): 42 public functions, 2 without docs.", "deltas": 6}
    ]}
  ],
  "default_reply": "Follow-up handled: {prompt}"
}"#;

async fn call(engine: &Engine, params: Value) -> Result<Value> {
    let req = crate::contract::request::parse(crate::contract::request::THREAD_METHOD, &params)?;
    engine.run(req, &|_| {}, None).await?.into_value()
}

fn say(out: &mut dyn Write, step: &str, result: &Value) -> Result<()> {
    let text = result["content"][0]["text"].as_str().unwrap_or("");
    writeln!(out, "\n▶ {step}\n  {}", text.replace('\n', "\n  "))?;
    Ok(())
}

/// Runs the demo; `keep` keeps the database at that path instead of a temporary one.
pub fn run(keep: Option<PathBuf>, out: &mut dyn Write) -> Result<()> {
    let mut quiet = QuietPipe::new(out);
    demo(keep, &mut quiet)?;
    if quiet.closed {
        return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe).into());
    }
    Ok(())
}

/// The demo's output when a reader may stop reading (`threadbase demo --keep FILE | head`):
/// once a write finds the pipe closed, the rest of the output is dropped and the demo runs to
/// its end, so it still keeps its database; [`run`] then reports the closed pipe, and the
/// command exits as SIGPIPE would (141), quietly. Other write errors stay errors. (Other
/// commands stop at the closed pipe: nothing of theirs is worth finishing unread.)
struct QuietPipe<W> {
    inner: W,
    closed: bool,
}

impl<W: std::io::Write> QuietPipe<W> {
    fn new(inner: W) -> Self {
        QuietPipe {
            inner,
            closed: false,
        }
    }

    fn quiet(&mut self, r: std::io::Result<usize>, len: usize) -> std::io::Result<usize> {
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(len)
            }
            r => r,
        }
    }
}

impl<W: std::io::Write> std::io::Write for QuietPipe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        let r = self.inner.write(buf);
        self.quiet(r, buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let r = self.inner.flush().map(|()| 0);
        self.quiet(r, 0).map(|_| ())
    }
}

fn demo(keep: Option<PathBuf>, out: &mut dyn Write) -> Result<()> {
    if let Some(path) = &keep {
        if path.exists() {
            return Err(crate::error::Error::invalid(format!(
                "demo --keep {}: that file already exists, and the demo only writes a new database. Repair: pass a path that does not exist yet, or delete the file first.",
                path.display()
            )));
        }
    }
    let started = Instant::now();
    let guard = Cleanup::new(tempfile_dir()?, keep.clone());
    let tmp = guard.dir.clone();
    let kept = keep.is_some();
    let db = keep.unwrap_or_else(|| tmp.join("demo.sqlite"));
    let work = tmp.join("project");
    std::fs::create_dir_all(&work)?;
    let script = tmp.join("scripted-agent.json");
    std::fs::write(&script, SCRIPT)?;
    let sessions = tmp.join("sessions");
    std::fs::create_dir_all(&sessions)?;
    let parent_session = sessions.join("parent.jsonl");
    let header = json!({"type":"session","version":3,"id":"demo-parent","timestamp":crate::time::now_iso(),"cwd":work});
    let first = json!({"type":"message","id":"d0000001","parentId":null,"timestamp":crate::time::now_iso(),
        "message":{"role":"user","content":[{"type":"text","text":"Plan the API review."}],"timestamp":crate::time::now_ms()}});
    std::fs::write(&parent_session, format!("{header}\n{first}\n"))?;
    let exe = std::env::current_exe()?;
    let pi_command = vec![
        exe.display().to_string(),
        "scripted-agent".into(),
        "--script".into(),
        script.display().to_string(),
    ];
    writeln!(out, "threadbase demo: database {}", db.display())?;
    writeln!(
        out,
        "children are `threadbase scripted-agent` processes speaking Pi's RPC protocol"
    )?;

    let store = Arc::new(Store::open(&db)?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result: Result<()> = rt.block_on(async {
        let runtime = Runtime::new(store.clone(), RuntimeConfig::default());
        let cfg = ServeConfig {
            session_file: Some(parent_session.clone()),
            session_id: "demo-parent".into(),
            cwd: work.clone(),
            scope_path: "/root".into(),
            depth: 0,
            self_id: None,
            parent_path: None,
            parent_id: None,
            root_session_id: "demo-parent".into(),
            parent_args: vec![],
            trusted: false,
            wire: Default::default(),
            report_usage: false,
            report_status: false,
            pi_command: pi_command.clone(),
            agent_dir: tmp.join("agent"),
            db: db.clone(),
            settings: Settings::default(),
            budget: Default::default(),
            agent_settings: Default::default(),
        };
        let root = Engine::new(cfg.clone(), store.clone(), runtime.clone())?;
        let r = call(&root, json!({"action":"start","name":"API survey","taskName":"api_survey","prompt":"Inspect the public API and report mismatches."})).await?;
        say(out, "start /root/api_survey", &r)?;
        let survey_id = crate::domain::ThreadId::new(r["details"]["snapshot"]["id"].as_str().unwrap_or_default());
        let r = call(&root, json!({"action":"start","prompt":"Review the docs for stale examples.","taskName":"review_docs"})).await?;
        say(out, "start /root/review_docs", &r)?;

        // The survey thread is itself a Pi session with its own manager: a nested child.
        let survey = crate::store::threads::thread_by_id_any(&store.read()?, &survey_id)?;
        let nested_cfg = ServeConfig {
            session_file: survey.as_ref().and_then(|t| t.session_file.clone()).map(PathBuf::from),
            session_id: survey.as_ref().and_then(|t| t.session_id.clone()).unwrap_or_else(|| "demo-survey".into()).into(),
            scope_path: "/root/api_survey".into(),
            depth: 1,
            self_id: Some(survey_id),
            parent_path: Some("/root".into()),
            ..cfg.clone()
        };
        let nested = Engine::new(nested_cfg, store.clone(), runtime.clone())?;
        let r = call(&nested, json!({"action":"start","prompt":"Check the examples compile.","taskName":"check_examples"})).await?;
        say(out, "start /root/api_survey/check_examples (from the survey's own manager)", &r)?;

        let r = call(&root, json!({"action":"wait","id":"api_survey","timeoutMs":20000})).await?;
        say(out, "wait api_survey", &r)?;
        let r = call(&root, json!({"action":"send","id":"api_survey","message":"Also list the undocumented functions."})).await?;
        say(out, "send a follow-up to api_survey", &r)?;
        let r = call(&root, json!({"action":"wait","id":"api_survey","timeoutMs":20000})).await?;
        say(out, "wait api_survey again", &r)?;
        let r = call(&root, json!({"action":"stop","id":"review_docs"})).await?;
        say(out, "stop review_docs", &r)?;
        let r = call(&root, json!({"action":"resume","id":"review_docs"})).await?;
        say(out, "resume review_docs (same id and session, no hidden prompt)", &r)?;
        let r = call(&root, json!({"action":"fork","id":"api_survey","taskName":"api_survey_branch"})).await?;
        say(out, "fork api_survey at its leaf", &r)?;
        let r = call(&nested, json!({"action":"wait","id":"check_examples","timeoutMs":20000})).await?;
        say(out, "wait check_examples", &r)?;
        let r = call(&root, json!({"action":"stop","id":"/root/api_survey_branch","force":true})).await?;
        say(out, "stop api_survey_branch (force)", &r)?;
        let r = call(&root, json!({"action":"archive","id":"api_survey_branch"})).await?;
        say(out, "archive api_survey_branch", &r)?;
        let r = call(&root, json!({"action":"list","state":"all","visibility":"all"})).await?;
        say(out, "list (all states, all visibility)", &r)?;
        runtime.shutdown().await;
        Ok(())
    });
    result?;
    store.settle_wal();
    drop(store);

    writeln!(out, "\n▶ threadbase tree")?;
    super::inspect::tree(
        &db,
        &super::inspect::TreeFilters {
            matching: None,
            session: None,
            json: false,
        },
        out,
    )?;
    writeln!(
        out,
        "\n▶ threadbase usage  (per thread and per subtree, across both managers)"
    )?;
    super::usage::run(&db, None, Default::default(), false, out)?;
    writeln!(
        out,
        "\n▶ threadbase events api_survey  (the retained ring, newest last)"
    )?;
    super::inspect::events(&db, "/root/api_survey", Default::default(), false, out)?;
    let query = "SELECT path, status, phase, exit_kind, archived FROM thread_tree";
    writeln!(out, "\n▶ threadbase sql \"{query}\"")?;
    super::sql::run(&db, query, false, &super::sql::Bounds::default(), out)?;
    writeln!(
        out,
        "\ndemo finished in {:.1} s; every line above was read back from SQLite rows.",
        started.elapsed().as_secs_f64()
    )?;
    if kept {
        guard.keep();
        writeln!(
            out,
            "kept: {} (sessions under {})",
            db.display(),
            tmp.display()
        )?;
    } else {
        drop(guard);
        writeln!(out, "the temporary database was removed; run `threadbase demo --keep demo.sqlite` to keep it.")?;
    }
    Ok(())
}

/// Removes the demo's temporary folder when the demo ends, whether it finished or failed (a
/// failed `--keep` run also removes the database it created, so the same command can run
/// again); [`Cleanup::keep`] keeps both after a successful `--keep` run.
struct Cleanup {
    dir: PathBuf,
    kept_db: Option<PathBuf>,
    armed: bool,
}

impl Cleanup {
    fn new(dir: PathBuf, kept_db: Option<PathBuf>) -> Cleanup {
        Cleanup {
            dir,
            kept_db,
            armed: true,
        }
    }

    fn keep(mut self) {
        self.armed = false;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(db) = &self.kept_db {
            for suffix in ["", "-wal", "-shm"] {
                let mut p = db.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(PathBuf::from(p));
            }
        }
    }
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "threadbase-demo-{}-{}",
        std::process::id(),
        crate::ids::random_hex(6)
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
