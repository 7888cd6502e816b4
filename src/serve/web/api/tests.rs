use super::*;

#[test]
fn filters_take_known_words_only() {
    assert!(filter(None).unwrap().is_none());
    let f = filter(Some("state=live&match=%2Froot%2Fa*")).unwrap();
    assert_eq!(f.state, "live");
    assert_eq!(f.glob.as_deref(), Some("/root/a*"));
    let f = filter(Some("match=api")).unwrap();
    assert_eq!(f.text.as_deref(), Some("api"));
    for bad in ["state=dead", "visibility=x", "contract=y"] {
        let e = filter(Some(bad)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidParams);
        assert!(e.message.contains("Repair:"), "{}", e.message);
    }
    assert!(number(Some("limit=0"), "limit", 200, 1, MAX_PAGE).is_err());
    assert!(number(Some("limit=x"), "limit", 200, 1, MAX_PAGE).is_err());
    assert_eq!(number(None, "limit", 200, 1, MAX_PAGE).unwrap(), 200);
    assert!(number(None, "id", -1, 0, 9).is_err());
}

#[test]
fn shell_words_are_quoted_when_needed() {
    assert_eq!(shell_quote("/a/b.jsonl"), "/a/b.jsonl");
    assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
    assert_eq!(shell_quote(""), "''");
}

#[test]
fn bad_actions_are_refused_with_a_repair() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("t.sqlite")).unwrap();
    for body in [
        &b""[..],
        b"{",
        b"[]",
        br#"{"thread":"x"}"#,
        br#"{"thread":"x","action":"explode"}"#,
        br#"{"thread":"x","action":"stop","extra":1}"#,
    ] {
        let e = action(&store, body).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidParams, "{}", e.message);
        assert!(e.message.contains("Repair:"), "{}", e.message);
    }
    let e = action(
        &store,
        br#"{"thread":"thread_000000000000","action":"stop"}"#,
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::UnknownReference);
    assert!(e.message.contains("Repair:"));
}
