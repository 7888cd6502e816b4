use super::*;

fn file() -> PathBuf {
    PathBuf::from("/cfg/threadbase-agents.json")
}

#[test]
fn a_full_file_parses_and_layers_merge() {
    let g = parse_file(
        &file(),
        r#"{"finalRecap": true, "modelSelection": "pick-first-available",
                "requiredChildExtensions": ["/x/a.ts", "rel/b.ts"],
                "agentTypes": {"reviewer": {"model": "fake/m", "thinkingLevel": "low",
                                "tools": {"allow": ["read", "bash"], "block": ["bash"]}}}}"#,
    )
    .unwrap();
    let p = parse_file(
        Path::new("/proj/.pi/threadbase-agents.json"),
        r#"{"finalRecap": false, "requiredChildExtensions": ["/x/a.ts", "/y/c.ts"],
                "agentTypes": {"coder": {"models": ["a/b", "c/d"]}}}"#,
    )
    .unwrap();
    let s = AgentSettings::merge([g, p]);
    assert!(!s.final_recap);
    assert_eq!(s.model_selection, ModelSelection::PickFirstAvailable);
    assert_eq!(s.tool_filtering, ToolFiltering::Allowed);
    assert_eq!(
        s.required_child_extensions,
        ["/x/a.ts", "/cfg/rel/b.ts", "/y/c.ts"]
    );
    assert_eq!(s.types["reviewer"].models, ["fake/m"]);
    assert_eq!(s.types["coder"].models, ["a/b", "c/d"]);
    let (flags, row) = tool_flags(s.tool_filtering, &s.types["reviewer"]).unwrap();
    assert_eq!(flags, ["--tools", "read"]);
    assert_eq!(
        row,
        serde_json::json!({"filtering": "allowed", "tools": ["read"]})
    );
    let (flags, _) = tool_flags(ToolFiltering::Allowed, &s.types["coder"]).unwrap();
    assert_eq!(flags, ["--no-tools"]);
    let (flags, _) = tool_flags(ToolFiltering::AllExceptBlocked, &s.types["reviewer"]).unwrap();
    assert_eq!(flags, ["--exclude-tools", "bash"]);
    assert!(tool_flags(ToolFiltering::All, &s.types["reviewer"]).is_none());
}

#[test]
fn bad_values_name_the_file_and_say_how_to_repair() {
    for (text, says) in [
        ("[]", "the file must be an object"),
        ("{\"x\": 1}", "unknown key \"x\""),
        ("{\"finalRecap\": 1}", "finalRecap must be true or false"),
        ("{\"modelSelection\": \"best\"}", "modelSelection must be"),
        ("{\"toolFiltering\": \"some\"}", "toolFiltering must be"),
        ("{\"requiredChildExtensions\": [3]}", "must hold strings"),
        ("{\"requiredChildExtensions\": [\" \"]}", "not a path"),
        (
            "{\"agentTypes\": {\"r\": {\"models\": [\"a/b\"], \"model\": \"a/b\"}}}",
            "both models and model",
        ),
        (
            "{\"agentTypes\": {\"r\": {\"models\": []}}}",
            "models is empty",
        ),
        (
            "{\"agentTypes\": {\"r\": {\"models\": [\"nomodel\"]}}}",
            "not provider/model-id",
        ),
        (
            "{\"agentTypes\": {\"r\": {\"models\": [\"a/b\", \"a/b\"]}}}",
            "twice",
        ),
        (
            "{\"agentTypes\": {\"r\": {\"thinkingLevel\": \"huge\"}}}",
            "thinkingLevel must be one of",
        ),
        (
            "{\"agentTypes\": {\"r\": {\"tools\": {\"allow\": [\"re*d\"]}}}}",
            "not a tool name",
        ),
        ("{\"agentTypes\": {\"bad name\": {}}}", "not a type name"),
        ("not json", "not JSON"),
    ] {
        let e = parse_file(&file(), text).unwrap_err();
        assert!(e.message.contains(says), "{text}: {}", e.message);
        assert!(
            e.message
                .starts_with("Invalid subagent settings in /cfg/threadbase-agents.json: "),
            "{}",
            e.message
        );
        assert!(e.message.contains("Repair:"), "{}", e.message);
    }
}

fn known(p: &str, id: &str, reasoning: bool) -> KnownModel {
    KnownModel {
        provider: p.into(),
        id: id.into(),
        reasoning,
    }
}

#[test]
fn models_are_chosen_as_the_reference_says() {
    let available = [known("fake", "a", false), known("fake", "b", true)];
    let listed = ["nokey/x".to_string(), "fake/b".into(), "fake/a".into()];
    let ctx = |selection, scope: Option<&'static [String]>| ModelContext {
        selection,
        listed: &listed,
        available: &available,
        scope,
        parent: Some("p/parent"),
        main: Some("m/main"),
    };
    assert_eq!(
        choose_model(&ctx(ModelSelection::PickFirstAvailable, None)).unwrap(),
        Some("fake/b".into())
    );
    static SCOPE: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| vec!["fake/a".to_string()]);
    assert_eq!(
        choose_model(&ctx(ModelSelection::PickFirstScoped, Some(&SCOPE))).unwrap(),
        Some("fake/a".into())
    );
    assert_eq!(
        choose_model(&ctx(ModelSelection::UseCurrent, None)).unwrap(),
        Some("m/main".into())
    );
    static NONE: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| vec!["other/*".to_string()]);
    let e = choose_model(&ctx(ModelSelection::PickFirstScoped, Some(&NONE))).unwrap_err();
    assert!(
        e.message
            .starts_with("No model of [nokey/x, fake/b, fake/a] is available"),
        "{}",
        e.message
    );
    // No list: the parent's, else the main session's.
    let empty: [String; 0] = [];
    let mut c = ctx(ModelSelection::PickFirstScoped, None);
    c.listed = &empty;
    assert_eq!(choose_model(&c).unwrap(), Some("p/parent".into()));
    c.parent = None;
    assert_eq!(choose_model(&c).unwrap(), Some("m/main".into()));
    // Scope patterns: exact, bare id, glob, a thinking suffix ignored.
    assert!(in_scope("fake/b", &["fake/*".into()]));
    assert!(in_scope("fake/b", &["b:high".into()]));
    assert!(!in_scope("fake/b", &["fake/a".into()]));
    // Thinking: first known level, off for a model that does not reason.
    assert_eq!(
        choose_thinking(
            [None, Some("low"), Some("high"), None],
            Some("fake/b"),
            &available
        ),
        "low"
    );
    assert_eq!(
        choose_thinking([None, Some("low"), None, None], Some("fake/a"), &available),
        "off"
    );
    assert_eq!(
        choose_thinking([None, None, None, None], None, &available),
        "off"
    );
}
