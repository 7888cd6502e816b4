use super::*;
use serde_json::json;

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "threadbase-session-unit-{tag}-{}-{}",
        std::process::id(),
        crate::ids::random_hex(8)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_lines(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn uuid_v7_has_version_variant_and_time() {
    let before = crate::time::now_ms() as u64;
    let id = uuid_v7();
    let after = crate::time::now_ms() as u64;
    assert_eq!(id.len(), 36, "{id}");
    let parts: Vec<&str> = id.split('-').collect();
    assert_eq!(
        parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12]
    );
    assert!(id
        .chars()
        .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c)));
    assert!(parts[2].starts_with('7'), "{id}");
    assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "{id}");
    let ms = u64::from_str_radix(&format!("{}{}", parts[0], parts[1]), 16).unwrap();
    assert!(before <= ms && ms <= after, "{ms} not in {before}..{after}");
    assert_ne!(uuid_v7(), uuid_v7());
    let v4 = uuid_v4();
    assert_eq!(&v4[14..15], "4");
}

#[test]
fn entry_ids_avoid_taken_ones() {
    let id = new_entry_id(|_| false);
    assert_eq!(id.len(), 8);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    // Everything 8 characters long is "taken": falls back to a full UUID.
    let long = new_entry_id(|c| c.len() == 8);
    assert_eq!(long.len(), 36);
}

#[test]
fn session_dir_encodes_the_cwd_like_pi() {
    assert_eq!(
        session_dir_for(Path::new("/tmp/agent"), Path::new("/home/ada/proj")),
        PathBuf::from("/tmp/agent/sessions/--home-ada-proj--")
    );
    assert_eq!(
        session_dir_for(
            Path::new("/tmp/agent/./x/.."),
            Path::new("/home/ada/proj/../other/")
        ),
        PathBuf::from("/tmp/agent/sessions/--home-ada-other--")
    );
    assert_eq!(
        session_dir_for(Path::new("/a"), Path::new("/srv/we:ird\\name")),
        PathBuf::from("/a/sessions/--srv-we-ird-name--")
    );
    assert_eq!(
        session_dir_for(Path::new("/a"), Path::new("/")),
        PathBuf::from("/a/sessions/----")
    );
    let relative = session_dir_for(Path::new("agent"), Path::new("proj"));
    let cwd = std::env::current_dir().unwrap();
    assert!(
        relative.starts_with(cwd.join("agent/sessions")),
        "{relative:?}"
    );
    assert!(relative
        .to_string_lossy()
        .ends_with(&format!("-{}--", "proj")));
}

#[test]
fn session_file_name_matches_pi() {
    assert_eq!(
        session_file_name(
            "2026-11-30T00:21:41.191Z",
            "01a229d4-2ec6-7434-9546-40b802397527"
        ),
        "2026-11-30T00-21-41-191Z_01a229d4-2ec6-7434-9546-40b802397527.jsonl"
    );
}

#[test]
fn read_skips_blank_lines_and_a_torn_tail() {
    let dir = temp_dir("torn");
    let path = dir.join("s.jsonl");
    write_lines(
        &path,
        "{\"type\":\"session\",\"version\":3,\"id\":\"s1\",\"timestamp\":\"t\",\"cwd\":\"/w\"}\n\n\
         {\"type\":\"model_change\",\"id\":\"a\",\"parentId\":null,\"provider\":\"p\",\"modelId\":\"m\"}\r\n\
         \n{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"mess",
    );
    let file = SessionFile::read(&path).unwrap();
    assert_eq!(file.header_id(), "s1");
    assert_eq!(file.cwd(), Some("/w"));
    assert_eq!(file.entries.len(), 1);
    assert_eq!(file.leaf_id(), Some("a"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn read_reports_the_bad_line() {
    let dir = temp_dir("bad");
    let path = dir.join("s.jsonl");
    write_lines(
        &path,
        "{\"type\":\"session\",\"version\":3,\"id\":\"s1\"}\n\n{not json}\n{\"type\":\"x\",\"id\":\"a\",\"parentId\":null}\n",
    );
    let err = SessionFile::read(&path).unwrap_err();
    assert_eq!(err.code, ErrorCode::Io);
    assert!(err.message.contains("line 3"), "{}", err.message);
    assert!(
        err.message.contains(&path.display().to_string()),
        "{}",
        err.message
    );
    assert!(err.message.contains("Repair:"), "{}", err.message);

    // A complete last line that is broken is not a torn append.
    write_lines(
        &path,
        "{\"type\":\"session\",\"version\":3,\"id\":\"s1\"}\n{broken}\n",
    );
    let err = SessionFile::read(&path).unwrap_err();
    assert!(err.message.contains("line 2"), "{}", err.message);

    // Not a header first.
    write_lines(&path, "{\"type\":\"message\",\"id\":\"a\"}\n");
    let err = SessionFile::read(&path).unwrap_err();
    assert!(err.message.contains("line 1"), "{}", err.message);
    assert!(err.message.contains("session header"), "{}", err.message);

    // An entry without an id.
    write_lines(
        &path,
        "{\"type\":\"session\",\"version\":3,\"id\":\"s1\"}\n{\"type\":\"message\"}\n",
    );
    let err = SessionFile::read(&path).unwrap_err();
    assert!(err.message.contains("line 2"), "{}", err.message);

    // Empty file.
    write_lines(&path, "\n\n");
    let err = SessionFile::read(&path).unwrap_err();
    assert!(err.message.contains("no session header"), "{}", err.message);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn read_of_a_missing_file_is_not_resumable() {
    let err = SessionFile::read("/nonexistent/threadbase/none.jsonl").unwrap_err();
    assert_eq!(err.code, ErrorCode::NotResumable);
    assert!(
        err.message
            .starts_with("Pi session file does not exist: /nonexistent/threadbase/none.jsonl."),
        "{}",
        err.message
    );
}

#[test]
fn read_migrates_v2_and_refuses_v1() {
    let dir = temp_dir("versions");
    let path = dir.join("s.jsonl");
    write_lines(
        &path,
        "{\"type\":\"session\",\"version\":2,\"id\":\"s\"}\n{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"message\":{\"role\":\"hookMessage\"}}\n",
    );
    let file = SessionFile::read(&path).unwrap();
    assert_eq!(file.entries[0]["message"]["role"], "custom");
    write_lines(
        &path,
        "{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"message\",\"id\":\"a\"}\n",
    );
    let err = SessionFile::read(&path).unwrap_err();
    assert!(err.message.contains("version 1"), "{}", err.message);
    std::fs::remove_dir_all(dir).unwrap();
}

fn file_of(entries: Vec<Value>) -> SessionFile {
    SessionFile {
        path: PathBuf::from("/tmp/x.jsonl"),
        header: json!({"type":"session","version":3,"id":"h","cwd":"/w"}),
        entries,
    }
}

#[test]
fn path_to_follows_parents_and_survives_orphans_and_cycles() {
    let file = file_of(vec![
        json!({"type":"x","id":"a","parentId":null}),
        json!({"type":"x","id":"b","parentId":"a"}),
        json!({"type":"x","id":"c","parentId":"a"}),
        json!({"type":"x","id":"d","parentId":"b"}),
        json!({"type":"x","id":"o","parentId":"missing"}),
        json!({"type":"x","id":"p","parentId":"q"}),
        json!({"type":"x","id":"q","parentId":"p"}),
    ]);
    let ids = |v: Vec<&Value>| {
        v.iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(file.path_to("d")), ["a", "b", "d"]);
    assert_eq!(ids(file.path_to("c")), ["a", "c"]);
    assert_eq!(ids(file.path_to("o")), ["o"]);
    assert_eq!(ids(file.path_to("q")), ["p", "q"]);
    assert!(file.path_to("zzz").is_empty());
    assert_eq!(file.leaf_id(), Some("q"));
    assert_eq!(file.entry("c").unwrap()["parentId"], "a");
}

#[test]
fn session_name_is_the_latest_session_info() {
    let file = file_of(vec![
        json!({"type":"session_info","id":"a","parentId":null,"name":"one"}),
        json!({"type":"session_info","id":"b","parentId":"a","name":" two "}),
    ]);
    assert_eq!(file.session_name(), Some("two"));
    let cleared = file_of(vec![
        json!({"type":"session_info","id":"a","parentId":null,"name":"one"}),
        json!({"type":"session_info","id":"b","parentId":"a","name":""}),
    ]);
    assert_eq!(cleared.session_name(), None);
}

#[test]
fn fork_position_parses() {
    assert_eq!(ForkPosition::parse("at").unwrap(), ForkPosition::At);
    assert_eq!(ForkPosition::parse("before").unwrap(), ForkPosition::Before);
    assert_eq!(ForkPosition::default(), ForkPosition::At);
    assert_eq!(ForkPosition::Before.as_str(), "before");
    let err = ForkPosition::parse("after").unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidParams);
}

#[test]
fn branch_drops_path_labels_and_rechains() {
    // A label on the path becomes the parent of the next message; the branch must skip it and
    // rewrite it as a fresh label entry after the path.
    let dir = temp_dir("labels");
    let source = SessionFile {
        path: dir.join("src.jsonl"),
        header: json!({"type":"session","version":3,"id":"h","cwd":"/w"}),
        entries: vec![
            json!({"type":"message","id":"u1","parentId":null,"timestamp":"t1","message":{"role":"user","content":"hi"}}),
            json!({"type":"label","id":"l1","parentId":"u1","timestamp":"t2","targetId":"u1","label":"start"}),
            json!({"type":"message","id":"a1","parentId":"l1","timestamp":"t3","message":{"role":"assistant","content":[],"stopReason":"stop"}}),
            json!({"type":"compaction","id":"c1","parentId":"a1","timestamp":"t4","summary":"s","firstKeptEntryId":"l1","tokensBefore":1}),
        ],
    };
    let out = dir.join("out.jsonl");
    let info = write_branch(&source, None, ForkPosition::At, &out, "new").unwrap();
    assert_eq!(info.leaf_id.as_deref(), Some("c1"));
    assert_eq!(info.entries_written, 3);
    assert_eq!(info.labels_written, 1);
    let written = SessionFile::read(&out).unwrap();
    let a1 = written.entry("a1").unwrap();
    assert_eq!(a1["parentId"], "u1");
    assert_eq!(written.entry("c1").unwrap()["firstKeptEntryId"], "a1");
    let label = written.entries.last().unwrap();
    assert_eq!(label["type"], "label");
    assert_eq!(label["parentId"], "c1");
    assert_eq!(label["targetId"], "u1");
    assert_eq!(label["timestamp"], "t2");
    assert_ne!(label["id"], "l1");
    assert_eq!(info.file_leaf_id.as_deref(), label["id"].as_str());
    assert_eq!(written.leaf_id(), label["id"].as_str());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn sanitize_name_like_pi() {
    assert_eq!(
        inherit_sanitize(" worker /root/task\r\n\nx "),
        "worker /root/task x"
    );
}

fn inherit_sanitize(name: &str) -> String {
    // Observed through the written session_info entry.
    let dir = temp_dir("name");
    let out = dir.join("c.jsonl");
    write_subagent_session(None, &out, "c", Path::new("/w"), None, name, json!({})).unwrap();
    let file = SessionFile::read(&out).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    file.entries[0]["name"].as_str().unwrap().to_string()
}

#[test]
fn inherited_context_is_compaction_aware() {
    let entries = vec![
        json!({"type":"message","id":"u0","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"old"}}),
        json!({"type":"message","id":"s1","parentId":"u0","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"system","content":"sys"}}),
        json!({"type":"message","id":"u1","parentId":"s1","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"kept"}}),
        json!({"type":"compaction","id":"c0","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","summary":"older summary","firstKeptEntryId":"u0","tokensBefore":5}),
        json!({"type":"compaction","id":"c1","parentId":"c0","timestamp":"2026-01-01T00:00:03.000Z","summary":"the summary","firstKeptEntryId":"s1","tokensBefore":9}),
        json!({"type":"message","id":"u2","parentId":"c1","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"user","content":"after"}}),
        json!({"type":"context_edit","id":"e1","parentId":"u2","targetId":"u1","replacement":{"content":"edited"}}),
        json!({"type":"context_edit","id":"e2","parentId":"e1","targetId":"u2","replacement":null}),
    ];
    let file = file_of(entries);
    let kept = inherited_entries(&file);
    let ids: Vec<&str> = kept.iter().map(|e| e["id"].as_str().unwrap()).collect();
    // c1 first (as a user message), then s1.. (system dropped) → u1 (edited), c0 (an older
    // compaction inside the kept range contributes nothing), u2 omitted by the null edit.
    assert_eq!(ids, ["c1", "u1"]);
    assert_eq!(kept[0]["type"], "message");
    assert_eq!(kept[0]["message"]["role"], "user");
    assert_eq!(kept[0]["message"]["content"], "the summary");
    assert_eq!(kept[0]["message"]["timestamp"], 1_767_225_603_000_i64);
    assert_eq!(kept[1]["message"]["content"], "edited");
}

/// The light title read agrees with the full parse: the last `session_info` wins, an empty
/// one clears the name, the first user message is the fallback, and lines that only mention
/// the words are not taken for entries.
#[test]
fn title_parts_match_the_full_parse() {
    let dir = temp_dir("title");
    let path = dir.join("s.jsonl");
    let header = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-12-01T10:00:00.000Z","cwd":"/w"}"#;
    let user = |id: &str, text: &str| {
        json!({"type":"message","id":id,"parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":text}]}}).to_string()
    };
    let info = |id: &str, name: &str| {
        json!({"type":"session_info","id":id,"parentId":null,"timestamp":"t","name":name})
            .to_string()
    };
    let said = json!({"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"the \"user\" asked for \"session_info\""}]}}).to_string();
    // (entries after the header, (name, first user message)).
    type Case<'a> = (Vec<String>, (Option<&'a str>, Option<&'a str>));
    let cases: Vec<Case<'_>> = vec![
        (vec![], (None, None)),
        (
            vec![said.clone(), user("u1", "Fix the bug"), user("u2", "later")],
            (None, Some("Fix the bug")),
        ),
        (
            vec![
                user("u1", "Fix"),
                info("i1", "Old"),
                said.clone(),
                info("i2", " New "),
            ],
            (Some("New"), Some("Fix")),
        ),
        (
            vec![user("u1", "Fix"), info("i1", "Old"), info("i2", "")],
            (None, Some("Fix")),
        ),
    ];
    for (lines, (want_name, want_user)) in cases {
        let mut text = format!("{header}\n");
        for l in &lines {
            text.push_str(l);
            text.push('\n');
        }
        write_lines(&path, &text);
        let full = SessionFile::read(&path).unwrap();
        let (name, first) = session_title_parts(&path).unwrap();
        assert_eq!(name.as_deref(), want_name, "{text}");
        assert_eq!(first.as_deref(), want_user, "{text}");
        assert_eq!(name.as_deref(), full.session_name(), "{text}");
        assert_eq!(first, full.first_user_text(), "{text}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
