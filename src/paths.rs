//! Path grammars of the three contracts, relative paths from a caller, and the sort key
//! that makes subtree listing a range scan.
//!
//! - Contract A (`thread`): `^/root(/[a-z0-9][a-z0-9_]{0,63})*$`; task names
//!   `^[a-z0-9][a-z0-9_]{0,63}$`; ids `^thread_[0-9a-f]{12}$`.
//! - Contract B (`agent_*`): segments `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`, at most 32, with
//!   independent roots such as `/k`.
//! - Contract C (`threads_*`): workers are top-level rows at `/<workerID>`.

use crate::error::{Error, Result};

/// The path of the main conversation in contracts A and B.
pub const ROOT: &str = "/root";
/// Contract B's segment limit.
pub const MAX_AGENT_SEGMENTS: usize = 32;

const TASK_NAME_REPAIR: &str = "taskName must be lower_snake_case: a lowercase letter or digit, then lowercase letters, digits or _ (max 64 chars), e.g. \"api_survey\"";

/// True when `s` is a contract A task name: `^[a-z0-9][a-z0-9_]{0,63}$`.
pub fn is_task_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b[1..]
            .iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
}

/// Checks a contract A task name, with the contract's hint on failure.
pub fn validate_task_name(s: &str) -> Result<()> {
    if is_task_name(s) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "Invalid taskName {}: {TASK_NAME_REPAIR}. Repair: pass a lower_snake_case taskName or omit it so one is generated.",
            json_quote(s)
        )))
    }
}

/// True when `s` is a contract A thread id: `^thread_[0-9a-f]{12}$`.
pub fn is_thread_id(s: &str) -> bool {
    s.len() == 19
        && s.starts_with("thread_")
        && s[7..]
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// True when `path` is a canonical contract A path: `/root` followed by task-name segments.
pub fn is_canonical_thread_path(path: &str) -> bool {
    match path.strip_prefix(ROOT) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('/')
            .is_some_and(|r| r.split('/').all(is_task_name)),
        None => false,
    }
}

/// Contract A reference resolution, step 2: the path a reference text names, if it parses.
///
/// A leading `/` must already be canonical; a leading `root/` gets a `/` prefix; any other
/// text (one segment or several) is appended to the current path. `None` when the result is
/// not a canonical path.
pub fn thread_reference_path(text: &str, current_path: &str) -> Option<String> {
    let candidate = if text.starts_with('/') {
        text.to_string()
    } else if text.starts_with("root/") {
        format!("/{text}")
    } else {
        format!("{current_path}/{text}")
    };
    is_canonical_thread_path(&candidate).then_some(candidate)
}

/// The text after the last `/`.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The path one level up, or `None` for a top-level path (`/root`, `/k`).
pub fn parent_path(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) | None => None,
        Some(i) => Some(&path[..i]),
    }
}

/// Number of segments: `/root` has 1, `/root/a` 2.
pub fn segment_count(path: &str) -> usize {
    path.split('/').filter(|s| !s.is_empty()).count()
}

/// True when `path` lies strictly below `ancestor`, by whole segments.
pub fn is_strictly_under(path: &str, ancestor: &str) -> bool {
    path.len() > ancestor.len() + 1
        && path.starts_with(ancestor)
        && path.as_bytes()[ancestor.len()] == b'/'
}

/// The key threads are ordered and range-scanned by: the path with `_` mapped to `!`, so byte
/// order equals JavaScript `localeCompare` on contract A's alphabet (`_` < `/` < digits <
/// letters). Stored as the generated column `threads.sort_key`; `!` never occurs in a path.
pub fn sort_key(path: &str) -> String {
    path.replace('_', "!")
}

/// Bounds `(lo, hi)` such that the strict descendants of `path` are exactly the rows with
/// `lo < sort_key < hi`: every descendant's key starts with `key(path) + "/"`, and `0` is the
/// byte right after `/`.
pub fn descendant_range(path: &str) -> (String, String) {
    let key = sort_key(path);
    (format!("{key}/"), format!("{key}0"))
}

// ---- contract B ---------------------------------------------------------------------------

const AGENT_EMPTY: &str = "Agent path must not be empty or contain surrounding whitespace";
const AGENT_GRAMMAR: &str = "Agent paths require slash-separated names (letters, digits, - or _); no dot segments, escapes, empty segments or trailing slash";

/// True when `seg` is a contract B segment: `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`.
pub fn is_agent_segment(seg: &str) -> bool {
    let b = seg.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// Canonicalises a contract B path given by a caller at `caller`: absolute paths are taken
/// as given, anything else is `caller + "/" + value`. Rejects the spellings the contract
/// rejects, with its error texts.
pub fn resolve_agent_path(value: &str, caller: &str) -> Result<String> {
    if value.is_empty() || value.trim() != value {
        return Err(Error::invalid(format!(
            "{AGENT_EMPTY}. Repair: pass a path such as \"/root/fix-auth\" or a name relative to the caller such as \"fix-auth\"."
        )));
    }
    let full = if value.starts_with('/') {
        value.to_string()
    } else {
        format!("{caller}/{value}")
    };
    let grammar_error = || {
        Error::invalid(format!(
            "{AGENT_GRAMMAR}. Repair: use names like \"fix-auth\" or \"/root/fix-auth/review\" (each segment starts with a letter or digit, at most 64 chars)."
        ))
    };
    let rest = full.strip_prefix('/').ok_or_else(grammar_error)?;
    let mut count = 0;
    for seg in rest.split('/') {
        if !is_agent_segment(seg) {
            return Err(grammar_error());
        }
        count += 1;
    }
    if count > MAX_AGENT_SEGMENTS {
        return Err(Error::invalid(format!(
            "{AGENT_GRAMMAR}. Agent paths may have at most {MAX_AGENT_SEGMENTS} segments; {} has {count}. Repair: use a shallower path.",
            json_quote(&full)
        )));
    }
    Ok(full)
}

/// True for a one-segment contract B path other than `/root`: the top of an independent tree.
pub fn is_independent_root(path: &str) -> bool {
    path != ROOT && parent_path(path).is_none()
}

/// Contract B's depth level: segments, plus one for independent trees (the main
/// conversation is level 1).
pub fn agent_level(path: &str) -> usize {
    let segs = segment_count(path);
    if path == ROOT || path.starts_with("/root/") {
        segs
    } else {
        segs + 1
    }
}

/// JSON string quoting, as JavaScript's `JSON.stringify` prints a string.
pub fn json_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_paths() {
        assert!(is_canonical_thread_path("/root"));
        assert!(is_canonical_thread_path("/root/a_b/c1"));
        for bad in [
            "/root/",
            "/root//a",
            "/root/A",
            "/root/a-b",
            "/root/_a",
            "root/a",
            "/roots",
            "/root/a/",
        ] {
            assert!(!is_canonical_thread_path(bad), "{bad}");
        }
        assert_eq!(
            thread_reference_path("b", "/root/a").as_deref(),
            Some("/root/a/b")
        );
        assert_eq!(
            thread_reference_path("root/x", "/root/a").as_deref(),
            Some("/root/x")
        );
        assert_eq!(
            thread_reference_path("x/y", "/root").as_deref(),
            Some("/root/x/y")
        );
        assert_eq!(
            thread_reference_path("/root/x", "/root/a").as_deref(),
            Some("/root/x")
        );
        assert_eq!(thread_reference_path("X", "/root"), None);
    }

    #[test]
    fn agent_paths() {
        assert_eq!(
            resolve_agent_path("fix-auth", "/root").unwrap(),
            "/root/fix-auth"
        );
        assert_eq!(resolve_agent_path("/k", "/root/a").unwrap(), "/k");
        assert_eq!(
            resolve_agent_path("w/Child", "/root").unwrap(),
            "/root/w/Child"
        );
        for bad in [
            "", " a", "a ", "..", "a/./b", "a//b", "a/", "a%20b", "a?b", "a\\b", "/",
        ] {
            assert!(resolve_agent_path(bad, "/root").is_err(), "{bad}");
        }
        assert!(resolve_agent_path("", "/root")
            .unwrap_err()
            .message
            .starts_with(AGENT_EMPTY));
        let deep = (0..32)
            .map(|i| format!("s{i}"))
            .collect::<Vec<_>>()
            .join("/");
        assert!(resolve_agent_path(&format!("/{deep}"), "/root").is_ok());
        assert!(resolve_agent_path(&format!("/{deep}/x"), "/root").is_err());
        assert_eq!(agent_level("/root/a/b"), 3);
        assert_eq!(agent_level("/k"), 2);
        assert!(is_independent_root("/k"));
        assert!(!is_independent_root("/root"));
    }

    #[test]
    fn ranges_and_keys() {
        assert!(is_strictly_under("/root/a/b", "/root/a"));
        assert!(!is_strictly_under("/root/ab", "/root/a"));
        assert!(!is_strictly_under("/root/a", "/root/a"));
        let mut v = vec!["/root/a1", "/root/a/x", "/root/a_b", "/root/a"];
        v.sort_by_key(|p| sort_key(p));
        assert_eq!(v, ["/root/a", "/root/a_b", "/root/a/x", "/root/a1"]);
    }
}
