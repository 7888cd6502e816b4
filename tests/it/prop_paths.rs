//! Property tests for the path grammars in `threadbase::paths`.
//!
//! - Contract A (reference/contract-semantics.md §1.3): canonical paths
//!   `^/root(/[a-z0-9][a-z0-9_]{0,63})*$`, task names `^[a-z0-9][a-z0-9_]{0,63}$`, ids
//!   `^thread_[0-9a-f]{12}$`, and the path form of a reference (§1.4 step 2).
//! - Contract B (§2.2): `resolve_agent_path(value, caller)` with segments
//!   `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`, at most 32 of them, and the contract's error texts.
//!
//! Valid spellings are generated from the grammars and must be accepted; mutated spellings
//! must be rejected; and on arbitrary strings from a small alphabet every hand-written matcher
//! must agree with an independent char-by-char automaton written below.

use crate::support::prop::{config, model_reference_path};

use proptest::prelude::*;
use proptest::sample::{select, Index};
use threadbase::paths::{
    basename, is_agent_segment, is_canonical_thread_path, is_task_name, is_thread_id, parent_path,
    resolve_agent_path, segment_count, thread_reference_path, validate_task_name,
};
use threadbase::ErrorCode;

/// The contract's texts (§2.2); the engine appends a `Repair:` hint after them.
const AGENT_EMPTY: &str = "Agent path must not be empty or contain surrounding whitespace";
const AGENT_GRAMMAR: &str = "Agent paths require slash-separated names (letters, digits, - or _); no dot segments, escapes, empty segments or trailing slash";

// ---- independent models: char-by-char automata, no splitting, no regex -----------------------

fn lower_or_digit(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn alnum(c: char) -> bool {
    c.is_ascii_alphabetic() || c.is_ascii_digit()
}

/// `^[a-z0-9][a-z0-9_]{0,63}$`.
fn model_task_name(s: &str) -> bool {
    let mut n = 0usize;
    for c in s.chars() {
        let ok = if n == 0 {
            lower_or_digit(c)
        } else {
            lower_or_digit(c) || c == '_'
        };
        if !ok {
            return false;
        }
        n += 1;
    }
    (1..=64).contains(&n)
}

/// `^/root(/[a-z0-9][a-z0-9_]{0,63})*$` as a state machine.
fn model_canonical(s: &str) -> bool {
    #[derive(Clone, Copy)]
    enum St {
        /// Matched this many chars of `/root`.
        Prefix(usize),
        /// Just read a `/` after `/root` or a segment.
        SegStart,
        /// Inside a segment of this length.
        Seg(usize),
    }
    const PREFIX: [char; 5] = ['/', 'r', 'o', 'o', 't'];
    let mut st = St::Prefix(0);
    for c in s.chars() {
        st = match st {
            St::Prefix(i) if i < PREFIX.len() => {
                if c == PREFIX[i] {
                    St::Prefix(i + 1)
                } else {
                    return false;
                }
            }
            St::Prefix(_) | St::Seg(_) if c == '/' => St::SegStart,
            St::Prefix(_) => return false,
            St::SegStart if lower_or_digit(c) => St::Seg(1),
            St::SegStart => return false,
            St::Seg(n) if n < 64 && (lower_or_digit(c) || c == '_') => St::Seg(n + 1),
            St::Seg(_) => return false,
        };
    }
    matches!(st, St::Prefix(5) | St::Seg(_))
}

/// `^thread_[0-9a-f]{12}$`.
fn model_thread_id(s: &str) -> bool {
    let chars: Vec<char> = s.chars().collect();
    let prefix: Vec<char> = "thread_".chars().collect();
    chars.len() == prefix.len() + 12
        && chars[..prefix.len()] == prefix[..]
        && chars[prefix.len()..]
            .iter()
            .all(|&c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`.
fn model_agent_segment(s: &str) -> bool {
    let mut n = 0usize;
    for c in s.chars() {
        let ok = if n == 0 {
            alnum(c)
        } else {
            alnum(c) || c == '_' || c == '-'
        };
        if !ok {
            return false;
        }
        n += 1;
    }
    (1..=64).contains(&n)
}

#[derive(Debug, PartialEq, Eq)]
enum AgentOutcome {
    Ok(String),
    /// The "must not be empty or contain surrounding whitespace" error.
    Empty,
    /// The grammar error (bad segment or more than 32 segments).
    Grammar,
}

/// §2.2's `canonicalPath(value, caller)` as a state machine over the full path.
fn model_resolve_agent(value: &str, caller: &str) -> AgentOutcome {
    let first = value.chars().next();
    let last = value.chars().next_back();
    match (first, last) {
        (None, _) | (_, None) => return AgentOutcome::Empty,
        (Some(f), Some(l)) if f.is_whitespace() || l.is_whitespace() => return AgentOutcome::Empty,
        _ => {}
    }
    let full = if value.starts_with('/') {
        value.to_string()
    } else {
        format!("{caller}/{value}")
    };
    // seg_len == 0 means "a segment must start here".
    let (mut segments, mut seg_len) = (0usize, 0usize);
    for (i, c) in full.chars().enumerate() {
        if i == 0 {
            if c != '/' {
                return AgentOutcome::Grammar;
            }
            segments = 1;
            continue;
        }
        if c == '/' {
            if seg_len == 0 {
                return AgentOutcome::Grammar;
            }
            segments += 1;
            seg_len = 0;
        } else if (seg_len == 0 && alnum(c))
            || (seg_len > 0 && seg_len < 64 && (alnum(c) || c == '_' || c == '-'))
        {
            seg_len += 1;
        } else {
            return AgentOutcome::Grammar;
        }
    }
    if seg_len == 0 || segments > 32 {
        return AgentOutcome::Grammar;
    }
    AgentOutcome::Ok(full)
}

fn outcome_of(r: threadbase::Result<String>) -> Result<AgentOutcome, String> {
    match r {
        Ok(p) => Ok(AgentOutcome::Ok(p)),
        Err(e) if e.code != ErrorCode::InvalidParams => Err(format!("wrong code: {e:?}")),
        Err(e) if e.message.starts_with(AGENT_EMPTY) => Ok(AgentOutcome::Empty),
        Err(e) if e.message.starts_with(AGENT_GRAMMAR) => Ok(AgentOutcome::Grammar),
        Err(e) => Err(format!(
            "message does not start with a contract text: {e:?}"
        )),
    }
}

// ---- strategies ------------------------------------------------------------------------------

/// Task names, short ones more often so prefixes and separators meet.
fn task_name() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => "[a-z0-9][a-z0-9_]{0,4}",
        1 => "[a-z0-9][a-z0-9_]{0,63}",
        1 => "[a-z0-9][a-z0-9_]{62,63}",
    ]
}

fn canonical_path(max_segments: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(task_name(), 0..=max_segments).prop_map(|segs| join_root(&segs))
}

fn join_root(segs: &[String]) -> String {
    let mut p = "/root".to_string();
    for s in segs {
        p.push('/');
        p.push_str(s);
    }
    p
}

fn agent_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[A-Za-z0-9][A-Za-z0-9_-]{0,4}",
        1 => "[A-Za-z0-9][A-Za-z0-9_-]{0,63}",
    ]
}

/// A valid caller path of contract B with exactly the given number of segments (1..=32).
fn agent_caller(segments: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = String> {
    prop_oneof![
        // Under the main conversation.
        prop::collection::vec(
            agent_segment(),
            (segments.start() - 1)..=(segments.end() - 1)
        )
        .prop_map(|segs| {
            let mut p = "/root".to_string();
            for s in segs {
                p.push('/');
                p.push_str(&s);
            }
            p
        }),
        // In an independent tree such as `/k`.
        prop::collection::vec(agent_segment(), segments)
            .prop_map(|segs| format!("/{}", segs.join("/"))),
    ]
}

/// Arbitrary text: single characters from a small alphabet and runs of one character (so
/// the 64-char limits are crossed), sometimes after a `/root` prefix.
fn arbitrary_text() -> impl Strategy<Value = String> {
    const ALPHABET: &[char] = &[
        '/', '/', '_', '-', '.', '%', '?', '\\', ' ', '\t', 'a', 'b', 'f', 'r', 'o', 't', 'z', 'A',
        'R', 'Z', '0', '1', '9', 'é',
    ];
    let piece = prop_oneof![
        6 => select(ALPHABET).prop_map(|c| c.to_string()),
        1 => (select(&['a', '0', '_', '-', 'A'][..]), 60usize..=70).prop_map(|(c, n)| c.to_string().repeat(n)),
        1 => Just("root".to_string()),
        1 => Just("..".to_string()),
        1 => Just("%2F".to_string()),
    ];
    let prefix = select(&["", "", "/root", "/root/", "root/", "/"][..]);
    (prefix, prop::collection::vec(piece, 0..12))
        .prop_map(|(p, pieces)| format!("{p}{}", pieces.concat()))
}

/// How a canonical path is spoiled.
#[derive(Debug, Clone, Copy)]
enum Mutation {
    Uppercase,
    Dash,
    Dot,
    EmptySegment,
    TrailingSlash,
    LeadingUnderscore,
    TooLong,
    MissingRoot,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    select(
        &[
            Mutation::Uppercase,
            Mutation::Dash,
            Mutation::Dot,
            Mutation::EmptySegment,
            Mutation::TrailingSlash,
            Mutation::LeadingUnderscore,
            Mutation::TooLong,
            Mutation::MissingRoot,
        ][..],
    )
}

/// How a valid contract B value is spoiled.
#[derive(Debug, Clone, Copy)]
enum AgentMutation {
    DotSegment,
    DotDotSegment,
    DoubleSlash,
    TrailingSlash,
    Escape,
    Question,
    Backslash,
    Space,
}

fn agent_mutation() -> impl Strategy<Value = AgentMutation> {
    select(
        &[
            AgentMutation::DotSegment,
            AgentMutation::DotDotSegment,
            AgentMutation::DoubleSlash,
            AgentMutation::TrailingSlash,
            AgentMutation::Escape,
            AgentMutation::Question,
            AgentMutation::Backslash,
            AgentMutation::Space,
        ][..],
    )
}

fn insert_at(s: &str, at: Index, what: &str) -> String {
    // Segments are ASCII, so every byte offset is a char boundary.
    let i = at.index(s.len() + 1);
    format!("{}{what}{}", &s[..i], &s[i..])
}

// ---- contract A ----------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// Generated canonical paths are accepted, split into parent + basename, and name
    /// themselves as references; their segments are task names; relative and `root/` forms
    /// name the same path.
    #[test]
    fn canonical_paths_are_accepted_and_round_trip(
        segs in prop::collection::vec(task_name(), 0..8),
        current in canonical_path(3),
    ) {
        let path = join_root(&segs);
        prop_assert!(is_canonical_thread_path(&path), "{path}");
        prop_assert!(model_canonical(&path), "{path}");
        prop_assert_eq!(segment_count(&path), segs.len() + 1);
        for s in &segs {
            prop_assert!(is_task_name(s), "{s}");
            prop_assert!(validate_task_name(s).is_ok(), "{s}");
        }
        match parent_path(&path) {
            None => {
                prop_assert!(segs.is_empty());
                prop_assert_eq!(basename(&path), "root");
            }
            Some(parent) => {
                prop_assert_eq!(format!("{parent}/{}", basename(&path)), path.clone());
                prop_assert_eq!(basename(&path), segs.last().unwrap().as_str());
                prop_assert!(is_canonical_thread_path(parent), "{parent}");
                prop_assert_eq!(parent, join_root(&segs[..segs.len() - 1]));
            }
        }
        // The path itself, its `root/` spelling and its relative spelling from `current`.
        prop_assert_eq!(thread_reference_path(&path, &current), Some(path.clone()));
        if !segs.is_empty() {
            prop_assert_eq!(thread_reference_path(&path[1..], &current), Some(path.clone()));
            let rel = segs.join("/");
            let expected = format!("{current}/{rel}");
            prop_assert_eq!(thread_reference_path(&rel, &current), Some(expected));
        }
    }

    /// Task names generated from the regex are accepted.
    #[test]
    fn task_names_are_accepted(name in "[a-z0-9][a-z0-9_]{0,63}") {
        prop_assert!(is_task_name(&name));
        prop_assert!(model_task_name(&name));
        prop_assert!(validate_task_name(&name).is_ok());
    }

    /// Spoiled spellings are rejected: uppercase, `-`, `.`, `//`, trailing `/`, leading `_`,
    /// a 65+ char segment, a missing `/root` prefix.
    #[test]
    fn mutated_paths_are_rejected(
        segs in prop::collection::vec(task_name(), 1..6),
        which in any::<Index>(),
        at in any::<Index>(),
        kind in mutation(),
        upper in "[A-Z]",
        long in "[a-z0-9][a-z0-9_]{64,90}",
        missing_root in select(&["", "root", "/Root", "/roots", "/rootx", "/ROOT", "root/"][..]),
        current in canonical_path(2),
    ) {
        let mut segs = segs;
        let i = which.index(segs.len());
        let mut spoiled_segment = None;
        let path = match kind {
            Mutation::Uppercase | Mutation::Dash | Mutation::Dot | Mutation::LeadingUnderscore
            | Mutation::TooLong => {
                segs[i] = match kind {
                    Mutation::Uppercase => insert_at(&segs[i], at, &upper),
                    Mutation::Dash => insert_at(&segs[i], at, "-"),
                    Mutation::Dot => insert_at(&segs[i], at, "."),
                    Mutation::LeadingUnderscore => format!("_{}", segs[i]),
                    _ => long.clone(),
                };
                spoiled_segment = Some(segs[i].clone());
                join_root(&segs)
            }
            Mutation::EmptySegment => {
                segs.insert(i, String::new());
                join_root(&segs)
            }
            Mutation::TrailingSlash => format!("{}/", join_root(&segs)),
            Mutation::MissingRoot => format!("{missing_root}/{}", segs.join("/")),
        };
        prop_assert!(!is_canonical_thread_path(&path), "{path} accepted");
        prop_assert!(!model_canonical(&path), "model accepted {path}");
        if path.starts_with('/') {
            prop_assert_eq!(thread_reference_path(&path, &current), None, "{}", path);
        }
        if let Some(seg) = spoiled_segment {
            prop_assert!(!is_task_name(&seg), "{seg}");
            let err = validate_task_name(&seg).unwrap_err();
            prop_assert_eq!(err.code, ErrorCode::InvalidParams);
            prop_assert!(err.message.starts_with("Invalid taskName "), "{}", err.message);
            prop_assert!(err.message.contains("taskName must be lower_snake_case"), "{}", err.message);
        }
    }

    /// Ids of the contract's shape are ids; a spoiled character is not.
    #[test]
    fn thread_ids(hex in "[0-9a-f]{12}", at in any::<Index>(), bad in select(&['A', 'g', '_', '-', ' ', 'F'][..])) {
        let id = format!("thread_{hex}");
        prop_assert!(is_thread_id(&id));
        let i = 7 + at.index(12);
        let mut spoiled: Vec<char> = id.chars().collect();
        spoiled[i] = bad;
        let spoiled: String = spoiled.into_iter().collect();
        prop_assert!(!is_thread_id(&spoiled), "{spoiled}");
        let longer = format!("{id}0");
        prop_assert!(!is_thread_id(&longer));
        prop_assert!(!is_thread_id(&id[..18]));
        // An id-shaped text is also a valid task name: resolution must test ids first.
        prop_assert!(is_task_name(&id));
    }
}

// ---- contract B ----------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// Relative values resolve to `caller + "/" + value` while the total stays ≤ 32 segments.
    #[test]
    fn agent_relative_paths_resolve(
        caller in agent_caller(1..=8),
        value in prop::collection::vec(agent_segment(), 1..=24),
    ) {
        let value = value.join("/");
        let expected = format!("{caller}/{value}");
        prop_assert!(segment_count(&expected) <= 32);
        prop_assert_eq!(resolve_agent_path(&value, &caller).map_err(|e| e.message), Ok(expected));
    }

    /// Absolute values of 1..=32 segments resolve to themselves whatever the caller.
    #[test]
    fn agent_absolute_paths_resolve(
        caller in agent_caller(1..=32),
        segs in prop::collection::vec(agent_segment(), 1..=32),
    ) {
        let value = format!("/{}", segs.join("/"));
        prop_assert_eq!(resolve_agent_path(&value, &caller).map_err(|e| e.message), Ok(value));
    }

    /// Empty values and surrounding whitespace give the first contract text.
    #[test]
    fn agent_whitespace_is_rejected(
        caller in agent_caller(1..=4),
        segs in prop::collection::vec(agent_segment(), 0..4),
        absolute in any::<bool>(),
        left in select(&["", " ", "\t", "\n", "\r\n", "\u{a0}", "\u{3000}"][..]),
        right in select(&["", " ", "\t", "\n", "\u{2028}"][..]),
    ) {
        let core = if absolute && !segs.is_empty() { format!("/{}", segs.join("/")) } else { segs.join("/") };
        let value = format!("{left}{core}{right}");
        prop_assume!(value.is_empty() || !left.is_empty() || !right.is_empty());
        let err = resolve_agent_path(&value, &caller).unwrap_err();
        prop_assert_eq!(err.code, ErrorCode::InvalidParams);
        prop_assert!(err.message.starts_with(AGENT_EMPTY), "{:?}: {}", value, err.message);
    }

    /// Dot segments, `//`, a trailing `/`, `%xx` escapes, `?`, `\` and spaces give the grammar
    /// text.
    #[test]
    fn agent_bad_spellings_are_rejected(
        caller in agent_caller(1..=4),
        segs in prop::collection::vec(agent_segment(), 1..6),
        absolute in any::<bool>(),
        which in any::<Index>(),
        at in any::<Index>(),
        kind in agent_mutation(),
        hex in "[0-9A-Fa-f]{2}",
    ) {
        let mut segs = segs;
        let i = which.index(segs.len());
        match kind {
            AgentMutation::DotSegment => segs.insert(i, ".".into()),
            AgentMutation::DotDotSegment => segs.insert(i, "..".into()),
            // A leading empty segment would make a relative value absolute.
            AgentMutation::DoubleSlash => segs.insert(if absolute { i } else { i.max(1) }, String::new()),
            AgentMutation::TrailingSlash => segs.push(String::new()),
            AgentMutation::Escape => segs[i] = insert_at(&segs[i], at, &format!("%{hex}")),
            AgentMutation::Question => segs[i] = insert_at(&segs[i], at, "?"),
            AgentMutation::Backslash => segs[i] = insert_at(&segs[i], at, "\\"),
            // Inside the value, so it is not surrounding whitespace.
            AgentMutation::Space => segs[i] = format!("{} x", segs[i]),
        }
        let value = if absolute { format!("/{}", segs.join("/")) } else { segs.join("/") };
        prop_assume!(value.trim() == value && !value.is_empty());
        let err = resolve_agent_path(&value, &caller).unwrap_err();
        prop_assert_eq!(err.code, ErrorCode::InvalidParams);
        prop_assert!(err.message.starts_with(AGENT_GRAMMAR), "{:?}: {}", value, err.message);
    }

    /// More than 32 segments, absolute or through a deep caller, give the grammar text.
    #[test]
    fn agent_too_many_segments_are_rejected(
        caller in agent_caller(1..=32),
        pool in prop::collection::vec(agent_segment(), 40),
        extra in 1usize..=8,
        absolute in any::<bool>(),
    ) {
        let value = if absolute {
            format!("/{}", pool[..32 + extra].join("/"))
        } else {
            pool[..32 - segment_count(&caller) + extra].join("/")
        };
        let err = resolve_agent_path(&value, &caller).unwrap_err();
        prop_assert_eq!(err.code, ErrorCode::InvalidParams);
        prop_assert!(err.message.starts_with(AGENT_GRAMMAR), "{:?}: {}", value, err.message);
    }
}

// ---- matchers against the models on arbitrary text ------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// Every matcher agrees with its automaton on arbitrary text.
    #[test]
    fn matchers_agree_with_models(
        text in arbitrary_text(),
        current in canonical_path(2),
        caller in prop_oneof![
            select(&["/root", "/root/w", "/k", "/Fix-auth_2/x"][..]).prop_map(String::from),
            agent_caller(30..=32),
        ],
    ) {
        prop_assert_eq!(is_task_name(&text), model_task_name(&text), "is_task_name({:?})", text);
        prop_assert_eq!(
            is_canonical_thread_path(&text), model_canonical(&text),
            "is_canonical_thread_path({:?})", text
        );
        prop_assert_eq!(
            thread_reference_path(&text, &current),
            model_reference_path(&text, &current, model_canonical),
            "thread_reference_path({:?}, {:?})", text, current
        );
        prop_assert_eq!(is_agent_segment(&text), model_agent_segment(&text), "is_agent_segment({:?})", text);
        let got = outcome_of(resolve_agent_path(&text, &caller));
        prop_assert_eq!(
            got, Ok(model_resolve_agent(&text, &caller)),
            "resolve_agent_path({:?}, {:?})", text, caller
        );
        prop_assert_eq!(is_thread_id(&text), model_thread_id(&text), "is_thread_id({:?})", text);
        if let Some(parent) = parent_path(&text) {
            prop_assert_eq!(format!("{parent}/{}", basename(&text)), text.clone());
        }
    }

    /// Near-ids: `thread_` followed by text from a hex-heavy alphabet.
    #[test]
    fn thread_id_matcher_agrees_with_model(
        prefix in select(&["thread_", "thread_", "Thread_", "thread-", "thread", ""][..]),
        tail in prop::collection::vec(select(&['0', '9', 'a', 'f', 'g', 'A', 'F', '_', ' ', 'é'][..]), 10..14),
    ) {
        let text = format!("{prefix}{}", tail.into_iter().collect::<String>());
        prop_assert_eq!(is_thread_id(&text), model_thread_id(&text), "{:?}", text);
    }
}
