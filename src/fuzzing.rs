//! Fuzz target bodies, shared by the `cargo fuzz` targets in `fuzz/fuzz_targets/` (nightly,
//! libFuzzer) and by `tests/it/fuzz_corpus.rs`, which replays every committed corpus file through
//! the same functions on stable. Each function takes arbitrary bytes and panics only when a
//! property of the code under test is broken (a panic is a finding).
//!
//! - [`rpc_codec`]: the child stdout framing and parsing ([`crate::runtime::rpc::read_line`]).
//! - [`paths`]: the path grammars of contracts A and B ([`crate::paths`]).
//! - [`session_file`]: the Pi session file reader ([`crate::pi::session::SessionFile::read`]).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use serde_json::Value;

use crate::error::ErrorCode;
use crate::paths;
use crate::pi::session::SessionFile;
use crate::runtime::rpc::{read_line, Line, LEAN_EVENTS, MAX_LINE_BYTES};

/// Runs a future that never waits on anything but in-memory readers.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// True when `line` starts the way the codec's lean parse recognises (`{"type":"<kind>",` or
/// `}` with a [`LEAN_EVENTS`] kind).
fn lean_prefixed(line: &[u8]) -> bool {
    LEAN_EVENTS.iter().any(|(kind, _)| {
        let head = format!("{{\"type\":\"{kind}\"");
        line.starts_with(head.as_bytes()) && matches!(line.get(head.len()), Some(b',' | b'}'))
    })
}

/// The child JSON-lines codec on arbitrary stdout bytes. The first byte picks the reader's
/// buffer size (1..=256) so chunk boundaries fall everywhere. Checked against a plain
/// reference framing: one [`Line`] per LF-terminated line (plus a final unterminated one), an
/// over-cap line is `TooLong` with its exact length, a `\r` before the LF is dropped, `Json`
/// exactly when the line is a JSON object (a lean parse keeps `type` and the listed fields with
/// their whole-parse values; it may accept a lean-prefixed line whose skipped fields a whole
/// parse refuses for depth or number range), `Invalid` otherwise, with a bounded text.
pub fn rpc_codec(data: &[u8]) {
    let (cap, body) = match data.split_first() {
        Some((c, rest)) => (usize::from(*c) + 1, rest),
        None => (1, data),
    };
    let mut reader = tokio::io::BufReader::with_capacity(cap, body);
    let mut buf = Vec::new();
    let mut got = Vec::new();
    while let Some(line) = ready(read_line(&mut reader, &mut buf)) {
        got.push(line);
        assert!(got.len() <= body.len() + 1, "more lines than bytes");
    }
    let mut expected: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
    if body.ends_with(b"\n") || body.is_empty() {
        expected.pop();
    }
    assert_eq!(got.len(), expected.len(), "one Line per framed line");
    for (line, raw) in got.iter().zip(expected) {
        if raw.len() > MAX_LINE_BYTES {
            assert_eq!(*line, Line::TooLong(raw.len()));
            continue;
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let whole = serde_json::from_slice::<Value>(raw);
        match line {
            Line::TooLong(n) => panic!("a {}-byte line reported TooLong({n})", raw.len()),
            Line::Json(Value::Object(map)) => match whole {
                Ok(Value::Object(all)) => {
                    for (k, v) in map {
                        assert_eq!(all.get(k), Some(v), "lean field {k} differs");
                    }
                    if !lean_prefixed(raw) {
                        assert_eq!(map, &all, "a non-lean line is kept whole");
                    } else {
                        assert!(map.contains_key("type"));
                    }
                }
                _ => assert!(
                    lean_prefixed(raw),
                    "Json for a line the whole parse refuses: {:?}",
                    String::from_utf8_lossy(raw)
                ),
            },
            Line::Json(other) => panic!("Json line that is not an object: {other}"),
            Line::Invalid(text) => {
                assert!(
                    !matches!(whole, Ok(Value::Object(_))),
                    "an object line reported Invalid: {text}"
                );
                // The cut text (≤ 200 chars) plus the parse error.
                assert!(text.chars().count() <= 400, "unbounded Invalid text");
            }
        }
    }
}

fn no_dot_or_empty_segments(path: &str) -> bool {
    path.starts_with('/')
        && path[1..]
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// The path grammars on arbitrary text. The input is `value`, then optionally a NUL and a
/// caller/current path. Contract A: an accepted canonical path has no dot or empty segments,
/// round-trips through the sort key and through reference resolution, and its parent is
/// canonical; a resolved reference is canonical and resolves to itself from anywhere. Contract
/// B: an accepted path is absolute with at most 32 well-formed segments, equals the value (when
/// absolute) or caller + `/` + value, and resolves to itself; every rejection has a `Repair:`
/// hint and the `invalid_params` code.
pub fn paths(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (value, caller) = match text.split_once('\0') {
        Some((v, c)) => (v, c),
        None => (&*text, paths::ROOT),
    };

    // Contract A.
    for p in [value, caller] {
        if paths::is_canonical_thread_path(p) {
            assert!(p == paths::ROOT || p.starts_with("/root/"), "{p:?}");
            assert!(no_dot_or_empty_segments(p), "{p:?}");
            assert_eq!(paths::sort_key(p).replace('!', "_"), p);
            assert_eq!(
                paths::thread_reference_path(p, "/root/x").as_deref(),
                Some(p)
            );
            match paths::parent_path(p) {
                None => assert_eq!(p, paths::ROOT),
                Some(up) => {
                    assert!(paths::is_canonical_thread_path(up), "{up:?}");
                    assert!(paths::is_strictly_under(p, up));
                    let (lo, hi) = paths::descendant_range(up);
                    let key = paths::sort_key(p);
                    assert!(lo < key && key < hi, "{p:?} outside its parent's range");
                }
            }
            for seg in p[1..].split('/').skip(1) {
                assert!(paths::is_task_name(seg));
            }
        }
    }
    if paths::is_task_name(value) {
        assert!(paths::validate_task_name(value).is_ok());
    } else {
        let e = paths::validate_task_name(value).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidParams);
        assert!(e.message.contains("Repair:"), "{}", e.message);
    }
    let current = if paths::is_canonical_thread_path(caller) {
        caller
    } else {
        paths::ROOT
    };
    if let Some(r) = paths::thread_reference_path(value, current) {
        assert!(paths::is_canonical_thread_path(&r), "{r:?}");
        assert!(no_dot_or_empty_segments(&r), "{r:?}");
        if value.starts_with('/') {
            assert_eq!(r, value);
        }
        assert_eq!(
            paths::thread_reference_path(&r, paths::ROOT).as_deref(),
            Some(&*r)
        );
    }

    // Contract B.
    match paths::resolve_agent_path(value, caller) {
        Ok(full) => {
            assert!(no_dot_or_empty_segments(&full), "{full:?}");
            let segs: Vec<&str> = full[1..].split('/').collect();
            assert!(segs.len() <= paths::MAX_AGENT_SEGMENTS);
            assert!(segs.iter().all(|s| paths::is_agent_segment(s)), "{full:?}");
            if value.starts_with('/') {
                assert_eq!(full, value);
            } else {
                assert_eq!(full, format!("{caller}/{value}"));
            }
            assert_eq!(
                paths::resolve_agent_path(&full, "/elsewhere").as_deref(),
                Ok(&*full),
                "an accepted path resolves to itself"
            );
            assert_eq!(paths::segment_count(&full), segs.len());
            assert!(paths::agent_level(&full) >= segs.len());
        }
        Err(e) => {
            assert_eq!(e.code, ErrorCode::InvalidParams);
            assert!(e.message.contains("Repair:"), "{}", e.message);
        }
    }
}

static FILES: AtomicU64 = AtomicU64::new(0);

/// The session file reader on arbitrary bytes (written to a temporary file). Accepted: the
/// header is a `session` object with a string id and version ≥ 2, every entry has a string
/// `type` (not `session`) and `id`, and the branch walk ends, holding only stored entries in
/// root-to-leaf order. Refused: an `io` error naming the file, with a `Repair:` hint.
pub fn session_file(data: &[u8]) {
    let path = std::env::temp_dir().join(format!(
        "threadbase-fuzz-{}-{}.jsonl",
        std::process::id(),
        FILES.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, data).expect("write the temporary session file");
    let read = SessionFile::read(&path);
    let _ = std::fs::remove_file(&path);
    match read {
        Ok(file) => {
            assert_eq!(file.header["type"], "session");
            assert!(file.header["id"].is_string());
            assert!(file.header["version"].as_u64().unwrap_or(1) >= 2);
            assert!(file.entries.len() <= data.iter().filter(|&&b| b == b'\n').count() + 1);
            for e in &file.entries {
                assert!(e["type"].is_string() && e["type"] != "session", "{e}");
                assert!(e["id"].is_string(), "{e}");
            }
            let branch = file.branch();
            assert!(branch.len() <= file.entries.len());
            if let Some(leaf) = file.leaf_id() {
                assert_eq!(branch.last().and_then(|e| e["id"].as_str()), Some(leaf));
                assert!(file.entry(leaf).is_some());
            } else {
                assert!(branch.is_empty());
            }
            for pair in branch.windows(2) {
                assert_eq!(pair[1]["parentId"], pair[0]["id"], "branch order");
            }
            let _ = (file.cwd(), file.parent_session(), file.session_name());
        }
        Err(e) => {
            assert_eq!(e.code, ErrorCode::Io, "{}", e.message);
            assert!(e.message.contains("Repair:"), "{}", e.message);
            assert!(
                e.message.contains(&*path.to_string_lossy()),
                "{}",
                e.message
            );
        }
    }
}
