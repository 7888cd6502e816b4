//! Smoke test against the real Pi 1.6 (`tools/pi/pi`, installed by `.ci/install-pi`, or the argv
//! in `$THREADBASE_TEST_PI`) in RPC mode, talking to the scripted fake LLM. Skips with a message
//! when Pi is missing, except under `CI=true`, where a missing Pi fails the test.

use crate::support::fake_llm;
use crate::support::pi_child;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, PiEnv, Step};
use pi_child::PiChild;
use serde_json::{json, Value};

/// How long one run (prompt → agent_settled) may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long Pi may take to exit after stdin is closed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

#[test]
fn real_pi_runs_a_bash_tool_call_and_answers() {
    let Some(pi) = pi_or_skip("real_pi_runs_a_bash_tool_call_and_answers") else {
        return;
    };
    let started = Instant::now();

    let fake = FakeLlm::with_script([
        Step::bash("echo hi"),
        Step::text_deltas(
            ["The command ", "printed ", "hi."],
            Duration::from_millis(20),
        ),
    ]);
    let env = hermetic_pi_env(&fake);
    let session = env.root.path().join("sessions").join("smoke.jsonl");
    let session_arg = session.to_string_lossy().into_owned();
    let mut pi_child = PiChild::spawn(&pi, &env, &["--session", &session_arg], &[]);

    pi_child.send(&json!({"id": "p1", "type": "prompt", "message": "run echo hi"}));
    let response = pi_child.response("p1", RUN_TIMEOUT);
    assert_eq!(response["id"], "p1", "{}", pi_child.dump());
    assert_eq!(response["command"], "prompt", "{}", pi_child.dump());
    assert_eq!(response["success"], true, "{}", pi_child.dump());
    assert_eq!(
        response["data"]["disposition"],
        "started",
        "{}",
        pi_child.dump()
    );

    pi_child.wait_for("agent_settled", RUN_TIMEOUT, |v| {
        v["type"] == "agent_settled"
    });
    let events = pi_child.seen.clone();
    let dump = pi_child.dump();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();

    // Order of the lifecycle markers (pi-rpc.md §5.2).
    let pos = |ty: &str| {
        types
            .iter()
            .position(|t| *t == ty)
            .unwrap_or_else(|| panic!("no {ty}\n{dump}"))
    };
    assert!(pos("response") < pos("agent_start"), "{dump}");
    assert!(pos("agent_start") < pos("tool_execution_start"), "{dump}");
    assert!(
        pos("tool_execution_start") < pos("tool_execution_end"),
        "{dump}"
    );
    assert!(pos("tool_execution_end") < pos("agent_end"), "{dump}");
    assert!(pos("agent_end") < pos("agent_settled"), "{dump}");
    assert_eq!(of_type(&events, "agent_start").len(), 1, "{dump}");
    assert_eq!(of_type(&events, "agent_end").len(), 1, "{dump}");

    let start = of_type(&events, "tool_execution_start")[0];
    assert_eq!(start["toolName"], "bash", "{dump}");
    assert_eq!(start["toolCallId"], "call_1", "{dump}");
    assert_eq!(start["args"]["command"], "echo hi", "{dump}");
    let end = of_type(&events, "tool_execution_end")[0];
    assert_eq!(end["toolName"], "bash", "{dump}");
    assert_eq!(end["isError"], false, "{dump}");
    let output = fake_llm::content_text(&end["result"]["content"]);
    assert_eq!(output.trim(), "hi", "{dump}");

    // The streamed text arrives as deltas and ends in an assistant message_end.
    let deltas: String = of_type(&events, "message_update")
        .iter()
        .filter(|e| e["assistantMessageEvent"]["type"] == "text_delta")
        .filter_map(|e| e["assistantMessageEvent"]["delta"].as_str())
        .collect();
    assert_eq!(deltas, "The command printed hi.", "{dump}");
    let assistant_ends: Vec<&Value> = of_type(&events, "message_end")
        .into_iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .collect();
    assert_eq!(assistant_ends.len(), 2, "{dump}");
    assert_eq!(
        assistant_ends[0]["message"]["stopReason"], "toolUse",
        "{dump}"
    );
    let last = &assistant_ends[1]["message"];
    assert_eq!(last["stopReason"], "stop", "{dump}");
    assert_eq!(
        fake_llm::content_text(&last["content"]),
        "The command printed hi.",
        "{dump}"
    );
    let agent_end = of_type(&events, "agent_end")[0];
    assert_eq!(agent_end["willRetry"], false, "{dump}");
    assert_eq!(
        of_type(&events, "agent_settled")[0]["aborted"],
        false,
        "{dump}"
    );

    // What Pi sent to the fake.
    let requests = fake.completion_requests();
    assert_eq!(requests.len(), 2, "requests: {requests:#?}\n{dump}");
    assert_eq!(fake.remaining(), 0);
    let first = &requests[0];
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(first.header("authorization"), Some("Bearer dummy-key"));
    let body = first.json();
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    assert!(
        first.tool_names().iter().any(|t| t == "bash"),
        "tools: {:?}",
        first.tool_names()
    );
    assert_eq!(first.last_user_text().as_deref(), Some("run echo hi"));
    let second = requests[1].messages();
    let tool_msg = second
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("tool result sent back");
    assert_eq!(tool_msg["tool_call_id"], "call_1");
    assert_eq!(fake_llm::content_text(&tool_msg["content"]).trim(), "hi");
    assert!(
        second
            .iter()
            .any(|m| m["role"] == "assistant" && m["tool_calls"][0]["function"]["name"] == "bash"),
        "{second:#?}"
    );

    // The session file was created at exactly the path given.
    let file = std::fs::read_to_string(&session).expect("session file written");
    let header: Value = serde_json::from_str(file.lines().next().unwrap()).unwrap();
    assert_eq!(header["type"], "session");
    assert!(file.contains("\"toolResult\""), "{file}");

    // The leftover detector sees the live Pi (so its "none left" below means something).
    let pi_pid = pi_child.child.id();
    assert!(
        env.leftover_processes().contains(&pi_pid),
        "marker not found on pi pid {pi_pid}"
    );

    if std::env::var_os("THREADBASE_TEST_VERBOSE").is_some() {
        eprintln!(
            "{}\n--- requests ---\n{:#?}",
            pi_child.dump(),
            fake.requests()
        );
    }
    close_and_reap(pi_child, &env);
    eprintln!("real_pi_smoke: passed in {:?}", started.elapsed());
}

/// Closes stdin, expects exit 0 within [`EXIT_TIMEOUT`], kills the process group in any case, and
/// asserts that no process of this run (group member or marker carrier) is left.
fn close_and_reap(mut pi_child: PiChild, env: &PiEnv) {
    let pgid = pi_child.pgid();
    drop(pi_child.stdin.take());
    let status = pi_child.wait_exit(EXIT_TIMEOUT);
    let dump = pi_child.dump();
    let status = status
        .unwrap_or_else(|| panic!("pi did not exit within {EXIT_TIMEOUT:?} of stdin EOF\n{dump}"));
    assert!(status.success(), "exit status {status:?}\n{dump}");

    pi_child.kill_group();
    let leftovers = env.leftovers_after(Duration::from_secs(5));
    for pid in &leftovers {
        if let Some(pid) = rustix::process::Pid::from_raw(*pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    assert!(leftovers.is_empty(), "processes left behind: {leftovers:?}");
    assert!(
        rustix::process::test_kill_process_group(pgid).is_err(),
        "process group {pgid:?} still has members"
    );
    drop(pi_child);
}

#[test]
fn real_pi_abort_during_a_hanging_request_then_a_provider_error() {
    let Some(pi) = pi_or_skip("real_pi_abort_during_a_hanging_request_then_a_provider_error")
    else {
        return;
    };
    let fake = FakeLlm::with_script([Step::hang(30_000), Step::error(500, "boom")]);
    let env = hermetic_pi_env(&fake);
    let mut pi_child = PiChild::spawn(&pi, &env, &["--no-session"], &[]);

    // A run whose LLM request hangs; abort it once the request reached the fake.
    pi_child.send(&json!({"id": "p1", "type": "prompt", "message": "wait"}));
    pi_child.response("p1", RUN_TIMEOUT);
    assert_eq!(
        fake.wait_for_requests(1, RUN_TIMEOUT).len(),
        1,
        "{}",
        pi_child.dump()
    );
    pi_child.send(&json!({"id": "a1", "type": "abort"}));
    let settled = pi_child.wait_for("agent_settled after abort", RUN_TIMEOUT, |v| {
        v["type"] == "agent_settled"
    });
    let dump = pi_child.dump();
    assert_eq!(settled["aborted"], true, "{dump}");
    let aborted = pi_child
        .seen
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .unwrap_or_else(|| panic!("no assistant message_end\n{dump}"));
    assert_eq!(aborted["message"]["stopReason"], "aborted", "{dump}");
    let abort_response = pi_child.response("a1", RUN_TIMEOUT);
    assert_eq!(abort_response["success"], true, "{}", pi_child.dump());

    // A provider error ends the next run with stopReason "error" and exactly one request.
    pi_child.send(&json!({"id": "p2", "type": "prompt", "message": "fail please"}));
    let response = pi_child.response("p2", RUN_TIMEOUT);
    assert_eq!(response["success"], true, "{}", pi_child.dump());
    let mark = pi_child.seen.len();
    let settled = pi_child.wait_for("agent_settled after error", RUN_TIMEOUT, |v| {
        v["type"] == "agent_settled"
    });
    let dump = pi_child.dump();
    assert_eq!(settled["aborted"], false, "{dump}");
    let failed = pi_child.seen[mark..]
        .iter()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .unwrap_or_else(|| panic!("no assistant message_end\n{dump}"));
    assert_eq!(failed["message"]["stopReason"], "error", "{dump}");
    let error = failed["message"]["errorMessage"]
        .as_str()
        .unwrap_or_default();
    assert!(
        error.contains("500") && error.contains("boom"),
        "errorMessage {error:?}\n{dump}"
    );
    assert!(
        pi_child
            .seen
            .iter()
            .all(|e| e["type"] != "auto_retry_start"),
        "{dump}"
    );
    let requests = fake.completion_requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert_eq!(requests[1].last_user_text().as_deref(), Some("fail please"));

    if std::env::var_os("THREADBASE_TEST_VERBOSE").is_some() {
        eprintln!("{}", pi_child.dump());
    }
    close_and_reap(pi_child, &env);
}

/// The fake itself, over a raw socket (runs without Pi).
#[test]
fn fake_llm_streams_scripted_steps_and_records_requests() {
    use std::net::TcpStream;

    fn post(fake: &FakeLlm, body: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", fake.port())).unwrap();
        write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }
    fn data_lines(resp: &str) -> Vec<Value> {
        resp.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    let fake = FakeLlm::with_script([
        Step::text_deltas(["a", "b"], Duration::from_millis(5)),
        Step::bash("echo hi"),
        Step::error(429, "slow down"),
    ]);
    let text = post(&fake, r#"{"messages":[{"role":"user","content":"q1"}]}"#);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("Content-Type: text/event-stream"), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let chunks = data_lines(&text);
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "ab");
    assert!(chunks
        .iter()
        .any(|c| c["choices"][0]["finish_reason"] == "stop"));
    assert!(chunks.iter().any(|c| c["usage"]["total_tokens"] == 15));

    let tool = post(
        &fake,
        r#"{"messages":[{"role":"user","content":[{"type":"text","text":"q2"}]}]}"#,
    );
    let chunks = data_lines(&tool);
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert_eq!(calls[0]["id"], "call_1");
    assert_eq!(calls[0]["function"]["name"], "bash");
    let args: String = calls
        .iter()
        .filter_map(|c| c["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({"command": "echo hi"})
    );
    assert!(chunks
        .iter()
        .any(|c| c["choices"][0]["finish_reason"] == "tool_calls"));

    let err = post(&fake, "{}");
    assert!(err.starts_with("HTTP/1.1 429 "), "{err}");
    assert!(err.contains("slow down"), "{err}");
    let exhausted = post(&fake, "{}");
    assert!(
        exhausted.starts_with("HTTP/1.1 500 ") && exhausted.contains("no scripted response left")
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[0].last_user_text().as_deref(), Some("q1"));
    assert_eq!(requests[1].last_user_text().as_deref(), Some("q2"));
    assert_eq!(
        requests.iter().map(|r| r.step).collect::<Vec<_>>(),
        [Some(0), Some(1), Some(2), None]
    );
    assert_eq!(fake.remaining(), 0);

    // A hang ends early when the fake is dropped.
    fake.push(Step::hang(60_000));
    let port = fake.port();
    let client = std::thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
            .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    });
    assert_eq!(fake.wait_for_requests(5, Duration::from_secs(5)).len(), 5);
    let t = Instant::now();
    drop(fake);
    assert_eq!(client.join().unwrap(), "");
    assert!(t.elapsed() < Duration::from_secs(5));
}

/// What a contract A launch asks first (the `get_state` written before the first prompt, as
/// pi-threads' launch does): real Pi 1.6 started like a thread's child (a header-only session
/// file, `--name`) answers at once with the session's file, id and name, nothing pending and
/// nothing streaming. The scripted agent, started the same way, answers the same keys and the
/// same values (only the model and the settings-driven `autoCompactionEnabled` differ).
#[test]
fn real_pi_get_state_before_the_first_prompt_matches_the_scripted_agent() {
    let Some(pi) =
        pi_or_skip("real_pi_get_state_before_the_first_prompt_matches_the_scripted_agent")
    else {
        return;
    };
    let fake = FakeLlm::with_script([]);
    let env = hermetic_pi_env(&fake);
    let sessions = env.root.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    // A thread's child file as serve writes it before the launch: the header only.
    let header_only = |name: &str, id: &str| {
        let path = sessions.join(name);
        let header = json!({"type":"session","version":3,"id":id,
            "timestamp":"2026-11-30T00:00:00.000Z","cwd":env.cwd,
            "parentSession":sessions.join("parent.jsonl")});
        std::fs::write(&path, format!("{header}\n")).unwrap();
        path.to_string_lossy().into_owned()
    };
    let real_file = header_only("real.jsonl", "0195f0aa-0000-7000-8000-000000000001");
    let mut real = PiChild::spawn(
        &pi,
        &env,
        &["--session", &real_file, "--name", "Say hi"],
        &[],
    );
    real.send(&json!({"id": "s1", "type": "get_state"}));
    let answer = real.response("s1", RUN_TIMEOUT);
    assert_eq!(answer["success"], true, "{}", real.dump());
    let real_state = answer["data"].clone();
    assert_eq!(
        (
            &real_state["sessionFile"],
            &real_state["sessionId"],
            &real_state["sessionName"],
            &real_state["pendingMessageCount"],
            &real_state["isStreaming"],
            &real_state["isCompacting"],
            &real_state["messageCount"],
        ),
        (
            &json!(real_file),
            &json!("0195f0aa-0000-7000-8000-000000000001"),
            &json!("Say hi"),
            &json!(0),
            &json!(false),
            &json!(false),
            &json!(0),
        ),
        "{real_state}"
    );
    // Pi sent nothing else: no event precedes the first prompt.
    assert_eq!(real.seen.len(), 1, "{}", real.dump());
    close_and_reap(real, &env);

    // The scripted agent, started the same way (its script and the same Pi flags).
    let scripted_file = header_only("scripted.jsonl", "0195f0aa-0000-7000-8000-000000000001");
    let script = env.root.path().join("script.json");
    std::fs::write(&script, "{}").unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"));
    cmd.arg("scripted-agent")
        .arg("--script")
        .arg(&script)
        .args(
            env.args.iter().filter(|a| {
                !matches!(a.as_str(), "--provider" | "--model" | "fake" | "fake-model")
            }),
        )
        .args(["--session", &scripted_file, "--name", "Say hi"])
        .current_dir(&env.cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut agent = cmd.spawn().unwrap();
    let mut stdin = agent.stdin.take().unwrap();
    writeln!(stdin, "{}", json!({"id": "s1", "type": "get_state"})).unwrap();
    stdin.flush().unwrap();
    drop(stdin);
    let mut out = String::new();
    agent
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(agent.wait().unwrap().success());
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "only the answer: {out}");
    let scripted_state = lines[0]["data"].clone();

    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(&scripted_state),
        keys(&real_state),
        "scripted {scripted_state}\nreal {real_state}"
    );
    let mut expected = real_state.clone();
    expected["sessionFile"] = json!(scripted_file);
    expected["model"] = scripted_state["model"].clone();
    // The hermetic settings.json turns compaction off for Pi; the scripted agent reads no
    // settings and keeps Pi's default (on).
    expected["autoCompactionEnabled"] = json!(true);
    assert_eq!(scripted_state, expected, "scripted vs real get_state");
}
