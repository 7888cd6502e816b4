use super::*;

fn v(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn rejected(args: &[&str]) -> String {
    validate_child_args(&v(args))
        .expect_err(&format!("{args:?} should be rejected"))
        .message
}

#[test]
fn accepts_every_allowlisted_flag() {
    for args in [
        v(&["--provider", "anthropic"]),
        v(&["--model", "anthropic/claude-sonnet-4-5"]),
        v(&["--models", "sonnet,haiku"]),
        v(&["--thinking", "high"]),
        v(&["--exclude-tools", "bash,edit"]),
        v(&["-xt", "bash"]),
        v(&[
            "--no-tools",
            "-nt",
            "--no-builtin-tools",
            "-nbt",
            "--offline",
            "--no-extensions",
            "-ne",
            "--no-skills",
            "-ns",
            "--no-prompt-templates",
            "-np",
            "--no-themes",
            "--no-context-files",
            "-nc",
        ]),
        // A value starting with `---` is not flag-like.
        v(&["--model", "---odd"]),
        // Values are consumed as values, even with `=`.
        v(&["--model", "a=b"]),
        v(&[]),
    ] {
        assert_eq!(validate_child_args(&args), Ok(()), "{args:?}");
    }
}

#[test]
fn rejects_inline_values() {
    let m = rejected(&["--model=opus"]);
    assert!(
            m.starts_with("Unsupported child Pi arg for pi-threads: --model=opus. Repair: inline --flag=value forms are not allowed; pass flag and value as separate array items"),
            "{m}"
        );
    assert!(rejected(&["--offline", "x=y"]).contains("x=y. Repair: inline"));
}

#[test]
fn rejects_positionals_and_subcommands() {
    for arg in [
        "--",
        "config",
        "install",
        "list",
        "remove",
        "uninstall",
        "update",
        "hello",
        "",
        "---x",
        "@file.md",
    ] {
        let m = rejected(&[arg]);
        assert!(
                m.starts_with(&format!(
                    "Unsupported child Pi arg for pi-threads: {arg}. Repair: remove package subcommands, prompts, and positional args; allowed start.args are"
                )),
                "{m}"
            );
    }
    // A stray positional after a boolean flag.
    assert!(rejected(&["--offline", "prompt"]).contains(": prompt. Repair:"));
}

#[test]
fn rejects_other_flags() {
    for arg in [
        "--tools",
        "-t",
        "--extension",
        "-e",
        "--skill",
        "--prompt-template",
        "--theme",
        "--session",
        "--fork",
        "--mode",
        "--print",
        "-p",
        "--approve",
        "--no-approve",
        "--name",
        "--api-key",
        "--unknown",
        "-",
        "-x",
    ] {
        let m = rejected(&[arg, "value"]);
        assert!(
                m.starts_with(&format!(
                    "Unsupported child Pi arg for pi-threads: {arg}. Repair: remove this flag or replace it with an allowlisted restriction; allowed start.args are"
                )),
                "{m}"
            );
        assert!(m.contains("--model <value>") && m.contains("--no-tools"));
    }
}

#[test]
fn rejects_missing_or_flag_like_values() {
    for args in [
        &["--model"][..],
        &["--provider", "--model", "x"],
        &["-xt", "-nt"],
        &["--thinking", "-"],
        &["--models", "--"],
    ] {
        let flag = args[0];
        let m = rejected(args);
        assert_eq!(
                m,
                format!(
                    "Unsupported child Pi arg for pi-threads: {flag} requires a value. Repair: pass the value as the next array item, e.g. \"args\": [\"{flag}\", \"value\"]."
                )
            );
    }
}

#[test]
fn rejected_errors_are_invalid_params() {
    let e = validate_child_args(&v(&["--tools", "read"])).unwrap_err();
    assert_eq!(e.code, crate::error::ErrorCode::InvalidParams);
}

#[test]
fn inherits_allowlisted_and_resource_flags() {
    let base = Path::new("/work/proj");
    let argv = v(&[
        "--model",
        "sonnet",
        "-t",
        "read,bash",
        "-xt",
        "edit",
        "-nc",
        "--offline",
        "-e",
        "ext/a.ts",
        "--skill",
        "../skills/s",
        "--prompt-template",
        "/abs/./p.md",
        "--theme",
        "npm:@x/theme",
        "--extension",
        "git:github.com/a/b",
        "--extension",
        "github:a/b",
        "--extension",
        "https://x.test/e.ts",
        "--extension",
        "http://x.test/e.ts",
        "--extension",
        "ssh:host/e",
        "--extension",
        "file:///opt/my%20ext.ts",
    ]);
    assert_eq!(
        inherited_args(&argv, base),
        v(&[
            "--model",
            "sonnet",
            "--tools",
            "read,bash",
            "--exclude-tools",
            "edit",
            "--no-context-files",
            "--offline",
            "--extension",
            "/work/proj/ext/a.ts",
            "--skill",
            "/work/skills/s",
            "--prompt-template",
            "/abs/p.md",
            "--theme",
            "npm:@x/theme",
            "--extension",
            "git:github.com/a/b",
            "--extension",
            "github:a/b",
            "--extension",
            "https://x.test/e.ts",
            "--extension",
            "http://x.test/e.ts",
            "--extension",
            "ssh:host/e",
            "--extension",
            "/opt/my ext.ts",
        ])
    );
}

#[test]
fn inherited_home_paths_expand() {
    let Some(home) = std::env::var_os("HOME") else {
        return;
    };
    let got = inherited_args(&v(&["--skill", "~/s"]), Path::new("/w"));
    assert_eq!(
        got[1],
        PathBuf::from(home).join("s").to_string_lossy().into_owned()
    );
}

#[test]
fn inherited_ignores_inline_and_never_inherited() {
    let argv = v(&[
        "pi",
        "--model=opus",
        "--api-key",
        "sk-1",
        "--append-system-prompt",
        "x",
        "--export",
        "out.html",
        "--fork",
        "f.jsonl",
        "--mode",
        "json",
        "--name",
        "n",
        "-n",
        "n2",
        "--session",
        "s.jsonl",
        "--session-dir",
        "d",
        "--session-id",
        "id",
        "--system-prompt",
        "sp",
        "--approve",
        "-a",
        "--continue",
        "-c",
        "--help",
        "-h",
        "--no-approve",
        "-na",
        "--print",
        "-p",
        "--resume",
        "-r",
        "--verbose",
        "--version",
        "-v",
        "--thinking",
        "low",
    ]);
    assert_eq!(
        inherited_args(&argv, Path::new("/w")),
        v(&["--thinking", "low"])
    );
}

#[test]
fn inherited_value_skipping_edges() {
    let w = Path::new("/w");
    // --list-models takes a value only when it is neither flag-like nor `@…`.
    assert_eq!(
        inherited_args(&v(&["--list-models", "sonnet", "--offline"]), w),
        v(&["--offline"])
    );
    assert_eq!(
        inherited_args(&v(&["--list-models", "--offline"]), w),
        v(&["--offline"])
    );
    // An unknown long flag swallows a plausible value; unknown short flags do not.
    assert_eq!(
        inherited_args(&v(&["--custom", "--offline", "--custom2", "val", "-x"]), w),
        v(&["--offline"])
    );
    assert_eq!(
        inherited_args(&v(&["--custom", "@prompt.md", "--offline"]), w),
        v(&["--offline"])
    );
    // A skipped value that looks like an allowlisted flag is still skipped.
    assert_eq!(
        inherited_args(&v(&["--name", "--offline"]), w),
        Vec::<String>::new()
    );
    // A value flag at the end has no value: dropped.
    assert_eq!(
        inherited_args(&v(&["--offline", "--model"]), w),
        v(&["--offline"])
    );
    // `--` ends the scan.
    assert_eq!(
        inherited_args(&v(&["--offline", "--", "--model", "x"]), w),
        v(&["--offline"])
    );
    // Positionals are ignored.
    assert_eq!(
        inherited_args(&v(&["fix the bug", "--no-themes"]), w),
        v(&["--no-themes"])
    );
}

#[test]
fn merge_puts_inherited_first() {
    let merged = merge_args(
        &v(&["--model", "sonnet", "--offline"]),
        &v(&["--thinking", "high", "-nc"]),
    )
    .unwrap();
    assert_eq!(
        merged,
        v(&[
            "--model",
            "sonnet",
            "--offline",
            "--thinking",
            "high",
            "-nc"
        ])
    );
    assert_eq!(merge_args(&[], &[]).unwrap(), Vec::<String>::new());
}

#[test]
fn merge_validates_child_args() {
    let e = merge_args(&[], &v(&["--tools", "read"])).unwrap_err();
    assert!(e
        .message
        .starts_with("Unsupported child Pi arg for pi-threads: --tools."));
}

#[test]
fn merge_protects_models_scope() {
    let inherited = v(&["--models", "sonnet,haiku"]);
    for child in [
        v(&["--provider", "openai"]),
        v(&["--model", "gpt"]),
        v(&["--models", "gpt"]),
        v(&["--thinking", "high"]),
        v(&["--offline", "--thinking", "off"]),
    ] {
        let e = merge_args(&inherited, &child).unwrap_err();
        assert!(
                e.message.contains(
                    "child model/provider/thinking args cannot override an inherited --models scope. Repair: "
                ),
                "{}",
                e.message
            );
    }
    assert_eq!(
        merge_args(&inherited, &v(&["--offline"])).unwrap(),
        v(&["--models", "sonnet,haiku", "--offline"])
    );
    // Without an inherited --models scope, model overrides are fine.
    assert!(merge_args(&v(&["--model", "a"]), &v(&["--model", "b"])).is_ok());
    // A `--models` text that is a value, not a flag, is no scope.
    assert!(merge_args(&v(&["--tools", "--models"]), &v(&["--model", "b"])).is_ok());
}

#[test]
fn merge_exclude_tools() {
    assert_eq!(
        merge_args(
            &v(&["--exclude-tools", "bash, edit", "--offline"]),
            &v(&[
                "-xt",
                "edit,write",
                "--no-themes",
                "--exclude-tools",
                "bash,ls,"
            ]),
        )
        .unwrap(),
        v(&[
            "--offline",
            "--no-themes",
            "--exclude-tools",
            "bash,edit,write,ls"
        ])
    );
    // Only the last inherited list counts (it is the one the parent's Pi applied).
    assert_eq!(
        merge_args(
            &v(&["--exclude-tools", "a", "--exclude-tools", "b"]),
            &v(&["-xt", "c"])
        )
        .unwrap(),
        v(&["--exclude-tools", "b,c"])
    );
    // Child without --exclude-tools: inherited list kept as is.
    assert_eq!(
        merge_args(&v(&["--exclude-tools", "a"]), &v(&["--offline"])).unwrap(),
        v(&["--exclude-tools", "a", "--offline"])
    );
    // Nothing left after merging: no flag at all.
    assert_eq!(
        merge_args(&[], &v(&["-xt", " , "])).unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn merge_restrictions_drop_inherited_enables() {
    let inherited = v(&[
        "--tools",
        "read,my_tool",
        "--extension",
        "/e1",
        "--skill",
        "/s1",
        "--prompt-template",
        "/p1",
        "--theme",
        "/t1",
        "--extension",
        "/e2",
        "--offline",
    ]);
    let drop = |child: &[&str], gone: &[&str]| {
        let merged = merge_args(&inherited, &v(child)).unwrap();
        for flag in gone {
            assert!(!merged.iter().any(|a| a == flag), "{child:?} kept {flag}");
        }
        merged
    };
    let m = drop(&["--no-tools"], &["--tools"]);
    assert_eq!(m.last().unwrap(), "--no-tools");
    assert!(!m.contains(&"read,my_tool".to_string()));
    let m = drop(&["-ne"], &["--extension"]);
    assert!(!m.contains(&"/e1".to_string()) && !m.contains(&"/e2".to_string()));
    assert!(m.contains(&"--skill".to_string()));
    drop(&["--no-skills"], &["--skill"]);
    drop(&["-np"], &["--prompt-template"]);
    let m = drop(&["--no-themes"], &["--theme"]);
    assert_eq!(
        m,
        v(&[
            "--tools",
            "read,my_tool",
            "--extension",
            "/e1",
            "--skill",
            "/s1",
            "--prompt-template",
            "/p1",
            "--extension",
            "/e2",
            "--offline",
            "--no-themes",
        ])
    );
    // Restrictions with nothing to drop change nothing else.
    assert_eq!(
        merge_args(&v(&["--offline"]), &v(&["-nt", "-ne"])).unwrap(),
        v(&["--offline", "-nt", "-ne"])
    );
}

#[test]
fn merge_no_builtin_tools_filters_inherited_tools() {
    assert_eq!(
        merge_args(
            &v(&["--tools", "read, my_tool,bash,other,my_tool", "--offline"]),
            &v(&["--no-builtin-tools"]),
        )
        .unwrap(),
        v(&[
            "--offline",
            "--tools",
            "my_tool,other",
            "--no-builtin-tools"
        ])
    );
    assert_eq!(
        merge_args(
            &v(&["--tools", "read,bash,edit,write,grep,find,ls"]),
            &v(&["-nbt"])
        )
        .unwrap(),
        v(&["--no-tools", "-nbt"])
    );
    // With --no-tools as well, --tools is simply dropped.
    assert_eq!(
        merge_args(&v(&["--tools", "my_tool"]), &v(&["-nbt", "-nt"])).unwrap(),
        v(&["-nbt", "-nt"])
    );
    // No inherited --tools: nothing to filter.
    assert_eq!(
        merge_args(&v(&["--offline"]), &v(&["-nbt"])).unwrap(),
        v(&["--offline", "-nbt"])
    );
}

#[test]
fn approval_requires_trust_and_containment() {
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("proj");
    let inside = parent.join("sub");
    let outside = dir.path().join("other");
    let sibling = dir.path().join("proj2");
    for d in [&inside, &outside, &sibling] {
        std::fs::create_dir_all(d).unwrap();
    }
    assert!(should_approve(true, &parent, &parent));
    assert!(should_approve(true, &parent, &inside));
    assert!(should_approve(true, &parent, &inside.join("..")));
    assert!(!should_approve(false, &parent, &inside));
    assert!(!should_approve(true, &parent, &outside));
    // A string prefix is not containment.
    assert!(!should_approve(true, &parent, &sibling));
    assert!(!should_approve(true, &inside, &parent));
    // Missing paths cannot be resolved: untrusted.
    assert!(!should_approve(true, &parent, &parent.join("missing")));
    assert!(!should_approve(true, &dir.path().join("missing"), &inside));
}

#[cfg(unix)]
#[test]
fn approval_follows_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("proj");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(parent.join("real")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let escape = parent.join("escape");
    std::os::unix::fs::symlink(&outside, &escape).unwrap();
    assert!(!should_approve(true, &parent, &escape));
    let inner = parent.join("inner");
    std::os::unix::fs::symlink(parent.join("real"), &inner).unwrap();
    assert!(should_approve(true, &parent, &inner));
    // A symlinked parent is compared by its real path.
    let link_parent = dir.path().join("link_proj");
    std::os::unix::fs::symlink(&parent, &link_parent).unwrap();
    assert!(should_approve(true, &link_parent, &parent.join("real")));
}

#[test]
fn lexical_normalisation() {
    assert_eq!(
        normalize_lexically(Path::new("/a/b/../c/./d/")),
        PathBuf::from("/a/c/d")
    );
    assert_eq!(normalize_lexically(Path::new("/../x")), PathBuf::from("/x"));
    assert_eq!(percent_decode("/a%20b%zz%2"), "/a b%zz%2");
}
