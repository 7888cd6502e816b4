//! `thread.states {ids}`, the Pi extension's `/threads` method: each thread's state in the
//! words every surface uses, in the order asked, the same words the list text shows.

use super::{details, poll_until, seed_closed_threads, text, with_serve, SCRIPT};
use serde_json::{json, Value};
use std::time::Duration;

/// Sends `thread.states` with `params`; the whole response line.
fn states(s: &mut crate::support::serve_client::Serve, params: Value) -> Value {
    let id = s.send("thread.states", params);
    s.response(id, Duration::from_secs(30))
}

/// A live idle thread, a stopped one, a stale one, one that exited with code 1 and one whose
/// exit code is unknown: each reads as the list's text line says (`<path> - <state>`, a live
/// one's ` pid=N` after it), an exit without a code as `closed/failed`; an unknown id is null.
#[test]
fn thread_states_are_the_words_the_list_shows() {
    let (w, mut s) = with_serve(SCRIPT);
    let a = s.thread(json!({"action": "start", "prompt": "a", "taskName": "a"}));
    let a = details(&a)["snapshot"]["id"].as_str().unwrap().to_string();
    poll_until(&mut s, &a, "a settles", |snap| snap["phase"] == "idle");
    let b = s.thread(json!({"action": "start", "prompt": "b", "taskName": "b"}));
    let b = details(&b)["snapshot"]["id"].as_str().unwrap().to_string();
    s.thread(json!({"action": "stop", "id": b, "force": true}));
    seed_closed_threads(&w.base.db, 3);
    crate::support::sql::exec(
        &w.base.db,
        "UPDATE threads SET exit_kind = 'exited', exit_code = 1 WHERE path = '/root/t_0001';
         UPDATE threads SET exit_kind = 'exited', exit_code = NULL WHERE path = '/root/t_0002';",
    );
    let listed = s.thread(json!({"action": "list"}));
    let threads = details(&listed)["threads"].as_array().unwrap().clone();
    assert_eq!(threads.len(), 5, "{listed}");
    let mut ids: Vec<String> = threads
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    ids.push("thread_ffffffffffff".into());
    let r = states(&mut s, json!({ "ids": ids }));
    let words = r["result"]["states"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(words.len(), ids.len(), "{r}");
    assert_eq!(words[threads.len()], Value::Null, "an unknown id: {r}");
    let by_path = |path: &str| {
        let i = threads.iter().position(|t| t["path"] == path).unwrap();
        words[i].as_str().unwrap().to_string()
    };
    assert_eq!(by_path("/root/a"), "live/idle");
    assert_eq!(by_path("/root/b"), "closed/stopped");
    assert_eq!(by_path("/root/t_0000"), "closed/stale");
    assert_eq!(by_path("/root/t_0001"), "closed/failed");
    assert_eq!(by_path("/root/t_0002"), "closed/failed");
    // The same words as the list's own text, thread by thread.
    for (t, word) in threads.iter().zip(words) {
        let path = t["path"].as_str().unwrap();
        let line = text(&listed)
            .lines()
            .find(|l| l.contains(&format!(" {path} - ")))
            .unwrap_or_else(|| panic!("no line for {path}: {listed}"));
        let shown = line.split_once(" - ").unwrap().1;
        let word = word.as_str().unwrap();
        assert!(
            shown == word
                || shown.starts_with(&format!("{word} "))
                || shown.starts_with(&format!("{word},")),
            "{path}: the list says {line:?}, thread.states {word:?}"
        );
    }
    w.close_all(s);
}

/// What `thread.states` refuses, each with a repair: a field it does not take, ids that are
/// not a list of strings, more ids than one request may name; and no ids is no states.
#[test]
fn thread_states_refuses_what_it_does_not_take() {
    let (w, mut s) = with_serve(SCRIPT);
    assert_eq!(
        states(&mut s, json!({"ids": []}))["result"],
        json!({"states": []})
    );
    let too_many: Vec<String> = (0..=threadbase::contract::request::MAX_STATE_IDS)
        .map(|i| format!("thread_{i:012x}"))
        .collect();
    for (params, says) in [
        (json!({"ids": [], "parent": "."}), "unknown field `parent`"),
        (json!({"ids": "thread_0123456789ab"}), "invalid type"),
        (json!({"ids": [1]}), "invalid type"),
        (json!({}), "missing field `ids`"),
        (json!({ "ids": too_many }), "at most 10000 ids"),
    ] {
        let r = states(&mut s, params.clone());
        assert_eq!(r["error"]["code"], "invalid_params", "{params}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{params}: {message}");
        assert!(message.contains("Repair:"), "{params}: {message}");
    }
    w.close_all(s);
}
