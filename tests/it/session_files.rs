//! Pi session files: reading, host-built branches, header-only child files and contract B
//! inherited-context transcripts (`threadbase::session`). The last test runs the real Pi 1.6
//! against the scripted fake LLM (skipped when Pi is not installed, except under `CI=true`).

use crate::support::{common, fake_llm, pi_child};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pi_child::PiChild;
use serde_json::{json, Value};
use threadbase::session::{
    self, inherited_entries, write_branch, write_header_only, write_inherited_context,
    ForkPosition, SessionFile, OWNERSHIP_CUSTOM_TYPE,
};
use threadbase::ErrorCode;

/// The example of pi-rpc.md §10.2 (usage filled in), one object per line, with a blank line and
/// CRLF thrown in.
const EXAMPLE: &str = concat!(
    r#"{"type":"session","version":3,"id":"01a229d4-2ec6-7434-9546-40b802397527","timestamp":"2026-11-30T00:21:41.191Z","cwd":"/home/ada/proj"}"#,
    "\n",
    r#"{"type":"model_change","id":"8179a12b","parentId":null,"timestamp":"2026-11-30T00:21:41.200Z","provider":"fake","modelId":"fake-model"}"#,
    "\n",
    r#"{"type":"thinking_level_change","id":"03bb5d06","parentId":"8179a12b","timestamp":"2026-11-30T00:21:41.201Z","thinkingLevel":"off"}"#,
    "\r\n\n",
    r#"{"type":"message","id":"b61e12c3","parentId":"03bb5d06","timestamp":"2026-11-30T00:21:41.215Z","message":{"role":"user","content":[{"type":"text","text":"run echo"}],"timestamp":1795998101215}}"#,
    "\n",
    r#"{"type":"message","id":"61a04931","parentId":"b61e12c3","timestamp":"2026-11-30T00:21:42.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"call_1","name":"bash","arguments":{"command":"echo hi"}}],"api":"openai-completions","provider":"fake","model":"fake-model","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":1795998102000,"responseId":"chatcmpl-fake"}}"#,
    "\n",
    r#"{"type":"message","id":"f8f66a63","parentId":"61a04931","timestamp":"2026-11-30T00:21:42.100Z","message":{"role":"toolResult","toolCallId":"call_1","toolName":"bash","content":[{"type":"text","text":"hi\n"}],"isError":false,"timestamp":1795998102100}}"#,
    "\n",
);

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("threadbase-session-")
        .tempdir()
        .unwrap()
}

fn write_source(dir: &Path, name: &str, lines: &[Value]) -> SessionFile {
    let path = dir.join(name);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
    SessionFile::read(&path).unwrap()
}

fn ids(entries: &[Value]) -> Vec<&str> {
    entries.iter().map(|e| e["id"].as_str().unwrap()).collect()
}

/// The ids of a file's entries that are not labels (its path), in file order.
fn path_ids(file: &SessionFile) -> Vec<&str> {
    file.entries
        .iter()
        .filter(|e| e["type"] != "label")
        .map(|e| e["id"].as_str().unwrap())
        .collect()
}

/// The keys of a written session header that links a parent, in Pi's order.
const HEADER_KEYS: [&str; 6] = ["type", "version", "id", "timestamp", "cwd", "parentSession"];

/// Checks a written session header: version 3, `id`, `cwd` and `parentSession` `parent`.
fn assert_header(header: &Value, id: &str, cwd: &str, parent: &Path) {
    assert_eq!(header["version"], 3);
    assert_eq!(header["id"], id);
    assert_eq!(header["cwd"], cwd);
    assert_eq!(header["parentSession"], parent.to_str().unwrap());
}

/// Every line of `path` as JSON, checking the file is compact JSON Lines ending in LF.
fn raw_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "{text}");
    assert!(!text.contains('\r'), "{text}");
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(serde_json::to_string(&v).unwrap(), l, "not compact");
            v
        })
        .collect()
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A tree with two branches and labels:
///
/// ```text
/// m0 model_change
/// └ u1 user "first"
///   └ a1 assistant "one"
///     ├ u2 user "second" ── a2 assistant "two" ── L1 label(a1 "good")
///     └ u3 user "other"  ── a3 assistant "three"
/// L2 label(u3 "side") (child of a3), L3 label(u1 "start"), L4 label(u1 "") clears, L5 label(u2 "q")
/// ```
fn tree_source(dir: &Path) -> SessionFile {
    let msg = |id: &str, parent: &str, role: &str, text: &str| {
        json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-11-30T00:00:00.000Z",
               "message":{"role":role,"content":[{"type":"text","text":text}],"timestamp":1}})
    };
    let label = |id: &str, parent: &str, target: &str, label: &str| json!({"type":"label","id":id,"parentId":parent,"timestamp":format!("ts-{id}"),"targetId":target,"label":label});
    write_source(
        dir,
        "source.jsonl",
        &[
            json!({"type":"session","version":3,"id":"src-id","timestamp":"2026-11-30T00:00:00.000Z","cwd":"/home/ada/proj"}),
            json!({"type":"model_change","id":"m0","parentId":null,"timestamp":"2026-11-30T00:00:00.000Z","provider":"fake","modelId":"fake-model"}),
            msg("u1", "m0", "user", "first"),
            msg("a1", "u1", "assistant", "one"),
            msg("u2", "a1", "user", "second"),
            msg("a2", "u2", "assistant", "two"),
            label("L1", "a2", "a1", "good"),
            msg("u3", "a1", "user", "other"),
            msg("a3", "u3", "assistant", "three"),
            label("L2", "a3", "u3", "side"),
            label("L3", "L2", "u1", "start"),
            label("L4", "L3", "u1", ""),
            label("L5", "L4", "u2", "q"),
            label("L6", "L5", "u1", "again"),
        ],
    )
}

#[test]
fn reads_the_reference_example() {
    let dir = tempdir();
    let path = dir.path().join("example.jsonl");
    std::fs::write(&path, EXAMPLE).unwrap();
    let file = SessionFile::read(&path).unwrap();
    assert_eq!(file.path, path);
    assert_eq!(file.header_id(), "01a229d4-2ec6-7434-9546-40b802397527");
    assert_eq!(file.cwd(), Some("/home/ada/proj"));
    assert_eq!(file.parent_session(), None);
    assert_eq!(file.header["version"], 3);
    assert_eq!(
        ids(&file.entries),
        ["8179a12b", "03bb5d06", "b61e12c3", "61a04931", "f8f66a63"]
    );
    assert_eq!(file.leaf_id(), Some("f8f66a63"));
    assert_eq!(
        file.entry("61a04931").unwrap()["message"]["stopReason"],
        "toolUse"
    );
    let path_ids: Vec<&str> = file
        .path_to("61a04931")
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(path_ids, ["8179a12b", "03bb5d06", "b61e12c3", "61a04931"]);
    assert_eq!(file.branch().len(), 5);

    // Branching at the leaf reproduces every entry byte for byte (same ids and parentIds).
    let out = dir.path().join("copy.jsonl");
    let info = write_branch(&file, None, ForkPosition::At, &out, "copy-id").unwrap();
    assert_eq!(info.source_entry_id.as_deref(), Some("f8f66a63"));
    assert_eq!(info.leaf_id.as_deref(), Some("f8f66a63"));
    assert_eq!(info.file_leaf_id.as_deref(), Some("f8f66a63"));
    let copied = raw_lines(&out);
    let originals: Vec<&str> = EXAMPLE
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.is_empty())
        .collect();
    let copied_text: Vec<String> = copied[1..].iter().map(|v| v.to_string()).collect();
    assert_eq!(copied_text, originals[1..]);
    let again = SessionFile::read(&out).unwrap();
    assert_eq!(again.entries, file.entries);
}

#[test]
fn branch_at_an_entry_keeps_root_to_entry() {
    let dir = tempdir();
    let source = tree_source(dir.path());
    let out = dir.path().join("sessions/nested/fork.jsonl");
    let new_id = session::uuid_v7();
    let before = threadbase::time::now_ms();
    let info = write_branch(&source, Some("a2"), ForkPosition::At, &out, &new_id).unwrap();
    assert_eq!(info.source_entry_id.as_deref(), Some("a2"));
    assert_eq!(info.leaf_id.as_deref(), Some("a2"));
    assert_eq!(info.entries_written, 5);

    let lines = raw_lines(&out);
    let header = &lines[0];
    assert_eq!(common::keys(header), HEADER_KEYS);
    assert_eq!(header["type"], "session");
    assert_header(header, &new_id, "/home/ada/proj", &source.path);
    let ts = threadbase::time::ms_from_iso(header["timestamp"].as_str().unwrap()).unwrap();
    assert!(ts >= before - 1000, "{ts} {before}");

    let written = SessionFile::read(&out).unwrap();
    let path_part: Vec<&Value> = written
        .entries
        .iter()
        .filter(|e| e["type"] != "label")
        .collect();
    // Path entries unchanged.
    let expected: Vec<&Value> = source.path_to("a2");
    assert_eq!(path_part, expected);
    assert_eq!(ids(&written.entries[..5]), ["m0", "u1", "a1", "u2", "a2"]);
}

#[test]
fn branch_keeps_labels_of_the_path_only() {
    let dir = tempdir();
    let source = tree_source(dir.path());
    let out = dir.path().join("fork.jsonl");
    let info = write_branch(&source, Some("a2"), ForkPosition::At, &out, "f").unwrap();
    let written = SessionFile::read(&out).unwrap();
    let labels: Vec<&Value> = written
        .entries
        .iter()
        .filter(|e| e["type"] == "label")
        .collect();
    // Resolved labels in Pi's map order: a1 "good" (L1), u1 "again" (cleared by L4, set again
    // by L6, so last), u2 "q"; u3 "side" is off the path; L1 itself was not on the path to a2.
    let got: Vec<(&str, &str, &str)> = labels
        .iter()
        .map(|l| {
            (
                l["targetId"].as_str().unwrap(),
                l["label"].as_str().unwrap(),
                l["timestamp"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("a1", "good", "ts-L1"),
            ("u2", "q", "ts-L5"),
            ("u1", "again", "ts-L6")
        ]
    );
    assert_eq!(info.labels_written, 3);
    // Chained after the path, with fresh 8-hex ids.
    assert_eq!(labels[0]["parentId"], "a2");
    assert_eq!(labels[1]["parentId"], labels[0]["id"]);
    assert_eq!(labels[2]["parentId"], labels[1]["id"]);
    for l in &labels {
        let id = l["id"].as_str().unwrap();
        assert_eq!(id.len(), 8);
        assert!(!id.starts_with('L'));
    }
    assert_eq!(info.leaf_id.as_deref(), Some("a2"));
    assert_eq!(info.file_leaf_id.as_deref(), labels[2]["id"].as_str());
    assert_eq!(written.leaf_id(), labels[2]["id"].as_str());
    // Pi's leaf (the last label) still sits on the branch: its path runs through a2.
    let leaf_path = written.path_to(written.leaf_id().unwrap());
    assert!(leaf_path.iter().any(|e| e["id"] == "a2"));
}

#[test]
fn branch_before_a_user_message_keeps_its_parent_path() {
    let dir = tempdir();
    let source = tree_source(dir.path());
    let out = dir.path().join("before.jsonl");
    let info = write_branch(&source, Some("u3"), ForkPosition::Before, &out, "b").unwrap();
    assert_eq!(info.source_entry_id.as_deref(), Some("u3"));
    assert_eq!(info.leaf_id.as_deref(), Some("a1"));
    let written = SessionFile::read(&out).unwrap();
    assert_eq!(path_ids(&written), ["m0", "u1", "a1"]);
    let label_targets: Vec<&str> = written
        .entries
        .iter()
        .filter(|e| e["type"] == "label")
        .map(|e| e["targetId"].as_str().unwrap())
        .collect();
    assert_eq!(label_targets, ["a1", "u1"]);
}

#[test]
fn branch_without_entry_id_uses_the_source_leaf() {
    let dir = tempdir();
    let source = tree_source(dir.path());
    // The source leaf is L6, a label entry on the a3 branch: the kept path ends at a3.
    let out = dir.path().join("leaf.jsonl");
    let info = write_branch(&source, None, ForkPosition::At, &out, "l").unwrap();
    assert_eq!(info.source_entry_id.as_deref(), Some("L6"));
    assert_eq!(info.leaf_id.as_deref(), Some("a3"));
    let written = SessionFile::read(&out).unwrap();
    assert_eq!(path_ids(&written), ["m0", "u1", "a1", "u3", "a3"]);

    // Before with the default entry: the leaf must be a user message.
    let out2 = dir.path().join("leaf-before.jsonl");
    let err = write_branch(&source, None, ForkPosition::Before, &out2, "l2").unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidParams);
    assert!(err.message.starts_with("Cannot fork before entry L6: the selected entry is not a user message. Repair: use position \"at\""), "{}", err.message);
    assert!(!out2.exists());
}

#[test]
fn branch_with_a_null_target_leaf_is_header_only() {
    let dir = tempdir();
    let source = write_source(
        dir.path(),
        "root-user.jsonl",
        &[
            json!({"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/w"}),
            json!({"type":"message","id":"u1","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi"}}),
            json!({"type":"label","id":"l1","parentId":"u1","timestamp":"t","targetId":"u1","label":"x"}),
        ],
    );
    let out = dir.path().join("empty.jsonl");
    let info = write_branch(&source, Some("u1"), ForkPosition::Before, &out, "e").unwrap();
    assert_eq!(info.source_entry_id.as_deref(), Some("u1"));
    assert_eq!(info.leaf_id, None);
    assert_eq!(info.file_leaf_id, None);
    let lines = raw_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["id"], "e");
    assert_eq!(lines[0]["parentSession"], source.path.to_str().unwrap());
    let written = SessionFile::read(&out).unwrap();
    assert!(written.entries.is_empty());
    assert_eq!(written.leaf_id(), None);

    // A header-only source branches to a header-only file too.
    let out2 = dir.path().join("empty2.jsonl");
    let info = write_branch(&written, None, ForkPosition::At, &out2, "e2").unwrap();
    assert_eq!(info.source_entry_id, None);
    assert_eq!(raw_lines(&out2).len(), 1);
}

#[test]
fn branch_errors_unknown_entry_and_non_user_before() {
    let dir = tempdir();
    let source = tree_source(dir.path());
    let out = dir.path().join("x.jsonl");
    let err = write_branch(&source, Some("nope"), ForkPosition::At, &out, "x").unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidParams);
    assert!(
        err.message
            .starts_with("Cannot fork: entry not found: nope. Repair: "),
        "{}",
        err.message
    );
    // Unknown entry is reported before the position rule.
    let err = write_branch(&source, Some("nope"), ForkPosition::Before, &out, "x").unwrap_err();
    assert!(err
        .message
        .starts_with("Cannot fork: entry not found: nope."));

    for not_user in ["a1", "m0", "L1"] {
        let err =
            write_branch(&source, Some(not_user), ForkPosition::Before, &out, "x").unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidParams);
        assert_eq!(
            err.message,
            format!("Cannot fork before entry {not_user}: the selected entry is not a user message. Repair: use position \"at\" to branch at this entry (it becomes the last entry of the fork), or pass the id of a user message to branch just before it.")
        );
    }
    assert!(!out.exists());
    assert_eq!(dir_names(dir.path()), ["source.jsonl"]);
}

#[test]
fn writes_are_atomic_and_refuse_an_existing_destination() {
    let dir = tempdir();
    let source = tree_source(dir.path());
    let out = dir.path().join("taken.jsonl");
    std::fs::write(&out, "keep me\n").unwrap();
    let err = write_branch(&source, Some("a2"), ForkPosition::At, &out, "x").unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert!(err.message.contains("already exists"), "{}", err.message);
    assert!(err.message.contains("Repair:"), "{}", err.message);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me\n");
    let err = write_header_only(&out, "x", Path::new("/w"), None).unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert_eq!(dir_names(dir.path()), ["source.jsonl", "taken.jsonl"]);

    // Successful writes leave exactly the destination behind, no temporary files.
    write_branch(
        &source,
        Some("a3"),
        ForkPosition::At,
        &dir.path().join("ok.jsonl"),
        "o",
    )
    .unwrap();
    write_header_only(&dir.path().join("h.jsonl"), "h", Path::new("/w"), None).unwrap();
    assert_eq!(
        dir_names(dir.path()),
        ["h.jsonl", "ok.jsonl", "source.jsonl", "taken.jsonl"]
    );

    // Racing writers of one path: exactly one wins, the rest get a conflict, no temp left.
    let race = dir.path().join("race/one.jsonl");
    let results: Vec<Result<(), ErrorCode>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let race = race.clone();
                s.spawn(move || {
                    write_header_only(&race, &format!("id{i}"), Path::new("/w"), None)
                        .map_err(|e| e.code)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(results
        .iter()
        .all(|r| r.is_ok() || *r == Err(ErrorCode::Conflict)));
    assert_eq!(dir_names(race.parent().unwrap()), ["one.jsonl"]);
    assert_eq!(raw_lines(&race).len(), 1);
}

#[test]
fn header_only_child_file_links_its_parent() {
    let dir = tempdir();
    let agent_dir = dir.path().join("agent");
    let cwd = Path::new("/home/ada/proj");
    let session_dir = session::session_dir_for(&agent_dir, cwd);
    assert_eq!(session_dir, agent_dir.join("sessions/--home-ada-proj--"));
    let parent = session_dir.join("2026-11-30T00-21-41-191Z_parent.jsonl");
    let id = session::uuid_v7();
    let name = session::session_file_name(&threadbase::time::now_iso(), &id);
    assert!(name.ends_with(&format!("_{id}.jsonl")));
    assert!(!name[..24].contains(':') && !name[..24].contains('.'));
    let child = session_dir.join(&name);
    write_header_only(&child, &id, cwd, Some(&parent)).unwrap();

    let lines = raw_lines(&child);
    assert_eq!(lines.len(), 1);
    let header = &lines[0];
    assert_eq!(common::keys(header), HEADER_KEYS);
    assert_header(header, &id, "/home/ada/proj", &parent);
    let file = SessionFile::read(&child).unwrap();
    assert_eq!(file.header_id(), id);
    assert_eq!(file.parent_session(), parent.to_str());
    assert_eq!(file.leaf_id(), None);

    // Without a parent: no parentSession key at all.
    let lone = session_dir.join("lone.jsonl");
    write_header_only(&lone, "lone", cwd, None).unwrap();
    assert!(raw_lines(&lone)[0].get("parentSession").is_none());
}

/// A parent branch with every kind the contract B snapshot keeps, rewrites or drops.
fn inherit_source(dir: &Path) -> SessionFile {
    let ts = "2026-11-30T00:00:00.000Z";
    let m = |id: &str, parent: &str, message: Value| json!({"type":"message","id":id,"parentId":parent,"timestamp":ts,"message":message});
    let assistant = |content: Value, stop: &str| {
        json!({"role":"assistant","content":content,"api":"openai-completions","provider":"fake",
               "model":"fake-model","stopReason":stop,"timestamp":2})
    };
    let call =
        |id: &str| json!({"type":"toolCall","id":id,"name":"bash","arguments":{"command":"ls"}});
    let result = |id: &str| json!({"role":"toolResult","toolCallId":id,"toolName":"bash","content":[{"type":"text","text":"out"}],"isError":false,"timestamp":3});
    write_source(
        dir,
        "parent.jsonl",
        &[
            json!({"type":"session","version":3,"id":"parent-id","timestamp":ts,"cwd":"/home/ada/proj"}),
            json!({"type":"model_change","id":"mc","parentId":null,"timestamp":ts,"provider":"fake","modelId":"fake-model"}),
            json!({"type":"thinking_level_change","id":"tl","parentId":"mc","timestamp":ts,"thinkingLevel":"off"}),
            m(
                "sys",
                "tl",
                json!({"role":"system","content":"You are…","sections":[]}),
            ),
            m(
                "u1",
                "sys",
                json!({"role":"user","content":[{"type":"text","text":"start"}],"timestamp":1}),
            ),
            // Two calls, only call_a answered: call_b is removed, stopReason stays toolUse.
            m(
                "a1",
                "u1",
                assistant(
                    json!([{"type":"text","text":"running"}, call("call_a"), call("call_b")]),
                    "toolUse",
                ),
            ),
            json!({"type":"custom","id":"cu","parentId":"a1","timestamp":ts,"customType":"ext-state","data":{"x":1}}),
            m("r_a", "cu", result("call_a")),
            // A result whose call is nowhere: dropped.
            m("r_x", "r_a", result("call_x")),
            // Only an unanswered call: block removed, toolUse → stop.
            m(
                "a2",
                "r_x",
                assistant(
                    json!([{"type":"text","text":"next"}, call("call_c")]),
                    "toolUse",
                ),
            ),
            // An errored assistant carrying call_d, and call_d's result: both dropped.
            m("a3", "a2", assistant(json!([call("call_d")]), "error")),
            m("r_d", "a3", result("call_d")),
            m(
                "a4",
                "r_d",
                assistant(json!([{"type":"text","text":"partial"}]), "aborted"),
            ),
            json!({"type":"custom_message","id":"cm","parentId":"a4","timestamp":ts,"customType":"note","content":"remember","display":true}),
            m(
                "bx",
                "cm",
                json!({"role":"bashExecution","command":"ls","output":"a b","exitCode":0,"cancelled":false,"truncated":false,"timestamp":4}),
            ),
            m(
                "cx",
                "bx",
                json!({"role":"custom","customType":"hook","content":"hooked","display":false,"timestamp":5}),
            ),
            json!({"type":"branch_summary","id":"bs","parentId":"cx","timestamp":"2026-11-30T00:00:01.000Z","fromId":"zz","summary":"we tried X"}),
            json!({"type":"label","id":"lb","parentId":"bs","timestamp":ts,"targetId":"u1","label":"l"}),
            json!({"type":"session_info","id":"si","parentId":"lb","timestamp":ts,"name":"parent name"}),
            m(
                "a5",
                "si",
                assistant(json!([{"type":"text","text":"done"}]), "stop"),
            ),
            // Off-branch entry (a sibling of a5): not inherited.
            m(
                "side",
                "si",
                json!({"role":"user","content":"side","timestamp":6}),
            ),
            // The leaf (last in file order) continues the a5 branch.
            m(
                "u9",
                "a5",
                json!({"role":"user","content":"last","timestamp":7}),
            ),
        ],
    )
}

#[test]
fn inherited_context_keeps_rewrites_and_drops_each_kind() {
    let dir = tempdir();
    let parent = inherit_source(dir.path());
    let kept = inherited_entries(&parent);
    assert_eq!(
        ids(&kept),
        ["u1", "a1", "r_a", "a2", "cm", "bx", "cx", "bs", "a5", "u9"]
    );
    let by_id = |id: &str| kept.iter().find(|e| e["id"] == id).unwrap();
    // a1 keeps its text and the answered call only; still toolUse.
    let a1 = &by_id("a1")["message"];
    assert_eq!(a1["content"].as_array().unwrap().len(), 2);
    assert_eq!(a1["content"][1]["id"], "call_a");
    assert_eq!(a1["stopReason"], "toolUse");
    // a2 lost its only call: stop.
    let a2 = &by_id("a2")["message"];
    assert_eq!(a2["content"], json!([{"type":"text","text":"next"}]));
    assert_eq!(a2["stopReason"], "stop");
    // Branch summary → user message with the summary text, same id and timestamp.
    let bs = by_id("bs");
    assert_eq!(bs["type"], "message");
    assert_eq!(bs["timestamp"], "2026-11-30T00:00:01.000Z");
    assert_eq!(
        bs["message"],
        json!({"role":"user","content":"we tried X","timestamp": threadbase::time::ms_from_iso("2026-11-30T00:00:01.000Z").unwrap()})
    );
    // Kept entries are otherwise unchanged.
    assert_eq!(by_id("cm"), parent.entry("cm").unwrap());
    assert_eq!(by_id("bx"), parent.entry("bx").unwrap());
    assert_eq!(by_id("u9"), parent.entry("u9").unwrap());

    // The written transcript.
    let out = dir.path().join("children/child.jsonl");
    let ownership = json!({"rootId":"parent-id","threadPath":"/root/task"});
    write_inherited_context(
        &parent,
        &out,
        "child-id",
        Path::new("/home/ada/proj"),
        &parent.path,
        "worker\n/root/task",
        ownership,
    )
    .unwrap();
    let lines = raw_lines(&out);
    let header = &lines[0];
    assert_header(header, "child-id", "/home/ada/proj", &parent.path);
    let child = SessionFile::read(&out).unwrap();
    assert_eq!(child.entries.len(), 2 + kept.len());
    let info = &child.entries[0];
    assert_eq!(info["type"], "session_info");
    assert_eq!(info["name"], "worker /root/task");
    assert_eq!(info["parentId"], Value::Null);
    assert_eq!(child.session_name(), Some("worker /root/task"));
    let owner = &child.entries[1];
    assert_eq!(owner["type"], "custom");
    assert_eq!(owner["customType"], OWNERSHIP_CUSTOM_TYPE);
    assert_eq!(
        owner["data"],
        json!({"rootId":"parent-id","threadPath":"/root/task","inheritedCount":kept.len()})
    );
    assert_eq!(owner["parentId"], info["id"]);
    // One chain: every entry's parent is the previous one, ids kept.
    for pair in child.entries.windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"]);
    }
    assert_eq!(ids(&child.entries[2..]), ids(&kept));
    assert_eq!(child.leaf_id(), Some("u9"));
    assert_eq!(child.branch().len(), child.entries.len());
    // Everything but parentId is as the snapshot had it.
    for (written, snap) in child.entries[2..].iter().zip(&kept) {
        let mut a = written.clone();
        let mut b = snap.clone();
        a["parentId"] = Value::Null;
        b["parentId"] = Value::Null;
        assert_eq!(a, b);
    }
}

#[test]
fn independent_root_child_inherits_nothing() {
    let dir = tempdir();
    let out = dir.path().join("k.jsonl");
    let n = session::write_subagent_session(
        None,
        &out,
        "k-id",
        Path::new("/w"),
        Some(Path::new("/sessions/root.jsonl")),
        "worker /k",
        json!({"rootId":"r","threadPath":"/k"}),
    )
    .unwrap();
    assert_eq!(n, 0);
    let file = SessionFile::read(&out).unwrap();
    assert_eq!(file.entries.len(), 2);
    assert_eq!(file.entries[1]["data"]["inheritedCount"], 0);
    assert_eq!(file.parent_session(), Some("/sessions/root.jsonl"));
    assert_eq!(file.leaf_id(), file.entries[1]["id"].as_str());
}

// ---------------------------------------------------------------------------------------------
// Real Pi
// ---------------------------------------------------------------------------------------------

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// A Pi child on a session file (dropping it SIGKILLs its group), with this file's helpers.
struct Pi(PiChild);

impl Pi {
    fn spawn(pi: &[String], env: &fake_llm::PiEnv, session: &Path) -> Pi {
        Pi(PiChild::spawn(
            pi,
            env,
            &["--session", session.to_str().unwrap()],
            &[],
        ))
    }

    fn dump(&self) -> String {
        self.0.dump()
    }

    fn wait_for(&mut self, what: &str, from: usize, pred: impl Fn(&Value) -> bool) -> Value {
        self.0.wait_for_since(what, from, RUN_TIMEOUT, pred)
    }

    /// Sends `cmd` with `id` and returns the successful response's `data`.
    fn call(&mut self, id: &str, mut cmd: Value) -> Value {
        cmd["id"] = Value::from(id);
        let mark = self.0.seen.len();
        self.0.send(&cmd);
        let response = self.wait_for(id, mark, |v| v["type"] == "response" && v["id"] == id);
        assert_eq!(response["success"], true, "{response}\n{}", self.dump());
        response["data"].clone()
    }

    fn prompt_and_settle(&mut self, id: &str, text: &str) {
        let mark = self.0.seen.len();
        self.call(id, json!({"type":"prompt","message":text}));
        let settled = self.wait_for("agent_settled", mark, |v| v["type"] == "agent_settled");
        assert_eq!(settled["aborted"], false, "{}", self.dump());
    }

    /// Closes stdin and expects a clean exit.
    fn finish(mut self) {
        drop(self.0.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.0.child.try_wait().unwrap() {
                assert!(status.success(), "exit {status:?}\n{}", self.dump());
                return;
            }
            assert!(
                Instant::now() < deadline,
                "pi did not exit\n{}",
                self.dump()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Real Pi (`None`: skip `test`), a fake LLM answering with `replies` in order, a hermetic
/// environment for it and a folder for session files in it.
fn pi_with_script(
    test: &str,
    replies: &[&str],
) -> Option<(Vec<String>, fake_llm::FakeLlm, fake_llm::PiEnv, PathBuf)> {
    let pi = fake_llm::pi_or_skip(test)?;
    let fake = fake_llm::FakeLlm::with_script(replies.iter().map(|r| fake_llm::Step::text(*r)));
    let env = fake_llm::hermetic_pi_env(&fake);
    let sessions = env.root.path().join("sessions");
    Some((pi, fake, env, sessions))
}

/// The user and assistant texts of the last of the `count` completion requests `fake` got.
fn last_conversation(fake: &fake_llm::FakeLlm, count: usize) -> Vec<String> {
    let requests = fake.completion_requests();
    assert_eq!(requests.len(), count);
    requests[count - 1]
        .messages()
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .map(|m| fake_llm::content_text(&m["content"]))
        .collect()
}

fn message_texts(messages: &Value) -> Vec<(String, String)> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let role = m["role"].as_str().unwrap_or_default().to_string();
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
                _ => String::new(),
            };
            (role, text)
        })
        .collect()
}

#[test]
fn real_pi_resumes_a_host_written_branch() {
    let replies = ["answer one", "answer two", "answer three"];
    let Some((pi, fake, env, sessions)) =
        pi_with_script("real_pi_resumes_a_host_written_branch", &replies)
    else {
        return;
    };

    // 1. Pi writes a session with two exchanges.
    let source_path = sessions.join("source.jsonl");
    let mut first = Pi::spawn(&pi, &env, &source_path);
    first.prompt_and_settle("p1", "question one");
    first.prompt_and_settle("p2", "question two");
    first.finish();
    let source = SessionFile::read(&source_path).unwrap();
    let user_two = source
        .entries
        .iter()
        .find(|e| {
            e["type"] == "message"
                && e["message"]["role"] == "user"
                && e["message"]["content"][0]["text"] == "question two"
        })
        .unwrap_or_else(|| panic!("no second user message in {:#?}", source.entries));
    let user_two_id = user_two["id"].as_str().unwrap().to_string();

    // 2. The host branches before the second question.
    let branch_path = sessions.join("nested").join(session::session_file_name(
        &threadbase::time::now_iso(),
        "ses_branch",
    ));
    let new_id = session::uuid_v7();
    let info = write_branch(
        &source,
        Some(&user_two_id),
        ForkPosition::Before,
        &branch_path,
        &new_id,
    )
    .unwrap();
    let branch_file = SessionFile::read(&branch_path).unwrap();
    let kept_messages: Vec<&Value> = branch_file
        .entries
        .iter()
        .filter(|e| e["type"] == "message")
        .collect();
    assert!(info.leaf_id.is_some());

    // 3. Pi opens the branch, keeps its header, and sees only the first exchange.
    let mut second = Pi::spawn(&pi, &env, &branch_path);
    let state = second.call("s1", json!({"type":"get_state"}));
    let dump = second.dump();
    assert_eq!(state["sessionId"], new_id.as_str(), "{state}\n{dump}");
    assert_eq!(
        state["sessionFile"],
        branch_path.to_str().unwrap(),
        "{state}\n{dump}"
    );
    assert_eq!(
        state["messageCount"].as_u64(),
        Some(kept_messages.len() as u64),
        "{state}\n{kept_messages:#?}"
    );
    let messages = second.call("m1", json!({"type":"get_messages"}))["messages"].clone();
    let texts = message_texts(&messages);
    let convo: Vec<(String, String)> = texts
        .into_iter()
        .filter(|(role, _)| role == "user" || role == "assistant")
        .collect();
    assert_eq!(
        convo,
        [
            ("user".to_string(), "question one".to_string()),
            ("assistant".to_string(), "answer one".to_string())
        ],
        "{messages:#}"
    );

    // A new prompt continues from the branch: the LLM sees the first exchange only.
    second.prompt_and_settle("p3", "question three");
    second.finish();
    assert_eq!(
        last_conversation(&fake, 3),
        ["question one", "answer one", "question three"]
    );

    if std::env::var_os("THREADBASE_TEST_VERBOSE").is_some() {
        for p in [&source_path, &branch_path] {
            eprintln!(
                "--- {} ---\n{}",
                p.display(),
                std::fs::read_to_string(p).unwrap()
            );
        }
    }
    // The file still carries the host-written header; Pi appended after our leaf.
    let after = SessionFile::read(&branch_path).unwrap();
    assert_eq!(after.header_id(), new_id);
    assert_eq!(after.parent_session(), source_path.to_str());
    let last_user = after
        .entries
        .iter()
        .rev()
        .find(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .unwrap();
    let path = after.path_to(last_user["id"].as_str().unwrap());
    assert!(
        path.iter()
            .any(|e| e["id"].as_str() == info.leaf_id.as_deref()),
        "{:#?}",
        after.entries
    );
}

#[test]
fn real_pi_resumes_an_inherited_context_transcript() {
    let replies = ["answer one", "child answer"];
    let Some((pi, fake, env, sessions)) =
        pi_with_script("real_pi_resumes_an_inherited_context_transcript", &replies)
    else {
        return;
    };

    // The parent: written by Pi, plus a branch summary appended at its leaf.
    let parent_path = sessions.join("parent.jsonl");
    let mut parent_pi = Pi::spawn(&pi, &env, &parent_path);
    parent_pi.prompt_and_settle("p1", "question one");
    parent_pi.finish();
    let leaf = SessionFile::read(&parent_path)
        .unwrap()
        .leaf_id()
        .unwrap()
        .to_string();
    let summary = json!({"type":"branch_summary","id":"bsum0001","parentId":leaf,
        "timestamp":threadbase::time::now_iso(),"fromId":leaf,"summary":"summary of a side branch"});
    let mut text = std::fs::read_to_string(&parent_path).unwrap();
    text.push_str(&format!("{summary}\n"));
    std::fs::write(&parent_path, text).unwrap();
    let parent = SessionFile::read(&parent_path).unwrap();

    let child_path = sessions.join("child.jsonl");
    let child_id = session::uuid_v7();
    write_inherited_context(
        &parent,
        &child_path,
        &child_id,
        &env.cwd,
        &parent_path,
        "worker /root/task",
        json!({"rootId": parent.header_id(), "threadPath": "/root/task"}),
    )
    .unwrap();

    let mut child = Pi::spawn(&pi, &env, &child_path);
    let state = child.call("s1", json!({"type":"get_state"}));
    assert_eq!(state["sessionId"], child_id.as_str(), "{state}");
    assert_eq!(state["sessionName"], "worker /root/task", "{state}");
    let messages = child.call("m1", json!({"type":"get_messages"}))["messages"].clone();
    let texts = message_texts(&messages);
    assert_eq!(
        texts,
        [
            ("user".to_string(), "question one".to_string()),
            ("assistant".to_string(), "answer one".to_string()),
            ("user".to_string(), "summary of a side branch".to_string()),
        ],
        "{messages:#}"
    );
    child.prompt_and_settle("p2", "child task");
    child.finish();
    assert_eq!(
        last_conversation(&fake, 2),
        [
            "question one",
            "answer one",
            "summary of a side branch",
            "child task"
        ]
    );
    let after = SessionFile::read(&child_path).unwrap();
    assert_eq!(after.header_id(), child_id);
    assert_eq!(after.entries[1]["customType"], OWNERSHIP_CUSTOM_TYPE);
}
