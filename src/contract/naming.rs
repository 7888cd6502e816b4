//! Contract A naming: generated taskNames, unique numeric suffixes, display names and fork
//! names (reference §1.5, §1.10 "fork").
//!
//! Everything here is pure apart from [`unique_task_name`]'s id-based fallbacks, which draw
//! random hex. Lengths of display names are counted in UTF-16 code units, as JavaScript does.

use unicode_normalization::UnicodeNormalization;

use crate::error::Error;
use crate::text::{utf16_len, utf16_prefix};

/// Longest taskName (one path segment).
pub const TASK_NAME_MAX_LEN: usize = 64;
/// Longest generated display name, in UTF-16 code units.
pub const DISPLAY_NAME_MAX_LEN: usize = 80;
/// Numeric-suffix attempts before the id-based fallbacks (attempt 1 is the bare base).
pub const SUFFIX_ATTEMPTS: u32 = 10_000;
/// Id-based fallback candidates tried after the numeric suffixes.
pub const ID_FALLBACK_ATTEMPTS: u32 = 100;
/// Display name of the parent session when it is a fork source.
pub const CURRENT_SESSION_NAME: &str = "current session";

/// Turns free text into a taskName: NFKD, combining marks U+0300–U+036F removed, lowercased,
/// each run of `[^a-z0-9]` replaced by one `_`, `_` trimmed, cut to 64 and a trailing `_`
/// trimmed again. `None` when nothing is left.
///
/// `"Café déjà vu"` gives `cafe_deja_vu`.
pub fn task_name_from_text(text: &str) -> Option<String> {
    let stripped: String = text
        .nfkd()
        .filter(|c| !('\u{300}'..='\u{36f}').contains(c))
        .collect();
    let lowered = stripped.to_lowercase();
    let mut out = String::with_capacity(lowered.len());
    for c in lowered.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('_') {
            // Runs collapse to one `_`; a leading run is dropped (the leading trim).
            out.push('_');
        }
    }
    let trimmed = out.trim_end_matches('_');
    if trimmed.is_empty() {
        return None;
    }
    Some(truncate_task_name(trimmed, TASK_NAME_MAX_LEN))
}

/// The first `max` chars of an ASCII taskName with trailing `_` trimmed; the untrimmed cut
/// when trimming would leave nothing.
fn truncate_task_name(value: &str, max: usize) -> String {
    // taskNames are ASCII, but stay on a char boundary for any input.
    let mut end = value.len().min(max);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    let cut = &value[..end];
    let trimmed = cut.trim_end_matches('_');
    if trimmed.is_empty() {
        cut.to_string()
    } else {
        trimmed.to_string()
    }
}

/// Candidate `attempt` (1-based) for `base`: the base itself for attempt 1, otherwise the stem
/// cut to `64 - len("_n")` with trailing `_` trimmed, plus `_n`.
pub fn task_name_with_suffix(base: &str, attempt: u32) -> String {
    if attempt <= 1 {
        return truncate_task_name(base, TASK_NAME_MAX_LEN);
    }
    let suffix = format!("_{attempt}");
    let stem = truncate_task_name(base, TASK_NAME_MAX_LEN.saturating_sub(suffix.len()));
    format!("{stem}{suffix}")
}

/// The first candidate that `taken` rejects as free, probing in the reference order: the base,
/// then `base_2` … `base_10000` (stems cut so the whole stays within 64 chars), then 100
/// id-based fallbacks `thread_` + 6 random hex. `None` when every candidate is taken; the
/// caller reports that with [`unique_name_error`].
///
/// `taken` is called once per candidate, in order, and probing stops at the first free one.
pub fn unique_task_name(base: &str, mut taken: impl FnMut(&str) -> bool) -> Option<String> {
    for attempt in 1..=SUFFIX_ATTEMPTS {
        let candidate = task_name_with_suffix(base, attempt);
        if !taken(&candidate) {
            return Some(candidate);
        }
    }
    for _ in 0..ID_FALLBACK_ATTEMPTS {
        let candidate = format!("thread_{}", crate::ids::random_hex(6));
        if !taken(&candidate) {
            return Some(candidate);
        }
    }
    None
}

/// The error for an exhausted [`unique_task_name`] under `parent_path`.
pub fn unique_name_error(parent_path: &str) -> Error {
    Error::conflict(format!(
        "Unable to generate a unique taskName under {parent_path}. Repair: provide an explicit unique start.taskName."
    ))
}

/// The 6 hex digits after `thread_` of a thread id (the whole text when it is not an id).
pub fn short_id(thread_id: &str) -> &str {
    let hex = thread_id.strip_prefix("thread_").unwrap_or(thread_id);
    let mut end = hex.len().min(6);
    while !hex.is_char_boundary(end) {
        end -= 1;
    }
    &hex[..end]
}

/// The base taskName before uniqueness: from `name`, else from `prompt`, else `thread_` +
/// `short_id` (the 6 hex digits of [`short_id`]).
pub fn base_task_name(name: Option<&str>, prompt: Option<&str>, short_id: &str) -> String {
    name.and_then(task_name_from_text)
        .or_else(|| prompt.and_then(task_name_from_text))
        .unwrap_or_else(|| format!("thread_{short_id}"))
}

/// JavaScript's `\s`: Unicode White_Space without U+0085, plus U+FEFF.
fn is_js_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

/// Trimmed, with every run of JavaScript whitespace turned into one space.
fn collapse_js_space(line: &str) -> String {
    line.split(is_js_space)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The display name derived from a prompt: its first line (split on `\n`) that contains a
/// letter or digit, whitespace collapsed, cut to 80 UTF-16 units (77 + `...`).
pub fn display_name_from_prompt(prompt: &str) -> Option<String> {
    let line = prompt
        .split('\n')
        .map(collapse_js_space)
        .find(|l| l.chars().any(char::is_alphanumeric))?;
    Some(truncate_display_name(&line))
}

/// `value` when at most 80 UTF-16 units, else its first 77 units, end-trimmed, plus `...`.
pub fn truncate_display_name(value: &str) -> String {
    if utf16_len(value) <= DISPLAY_NAME_MAX_LEN {
        return value.to_string();
    }
    let head = utf16_prefix(value, DISPLAY_NAME_MAX_LEN - 3).trim_end_matches(is_js_space);
    format!("{head}...")
}

/// The display name passed to the child as `--name`: a given `name` wins; else the first
/// useful prompt line ([`display_name_from_prompt`]); else the taskName with `_` turned into
/// spaces; else `thread_` + `short_id`.
pub fn display_name(
    name: Option<&str>,
    prompt: Option<&str>,
    task_name: Option<&str>,
    short_id: &str,
) -> String {
    if let Some(n) = name.filter(|n| !n.is_empty()) {
        return n.to_string();
    }
    if let Some(d) = prompt.and_then(display_name_from_prompt) {
        return d;
    }
    if let Some(t) = task_name.filter(|t| !t.is_empty()) {
        return t.replace('_', " ");
    }
    format!("thread_{short_id}")
}

/// The default fork name: `Fork of <source name>`, or `Fork of current session` when the
/// source is the parent session (`None`).
pub fn fork_name(source_name: Option<&str>) -> String {
    format!("Fork of {}", source_name.unwrap_or(CURRENT_SESSION_NAME))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::is_task_name;
    use std::cell::RefCell;
    use std::collections::HashSet;

    #[test]
    fn nfkd_and_marks() {
        assert_eq!(
            task_name_from_text("Café déjà vu").as_deref(),
            Some("cafe_deja_vu")
        );
        // Decomposed input too.
        assert_eq!(
            task_name_from_text("Cafe\u{301} au lait").as_deref(),
            Some("cafe_au_lait")
        );
        // Compatibility forms: ligature, full-width digits, superscript, Kelvin sign.
        assert_eq!(
            task_name_from_text("ﬁle ２ x²").as_deref(),
            Some("file_2_x2")
        );
        assert_eq!(
            task_name_from_text("\u{212a}elvin").as_deref(),
            Some("kelvin")
        );
        assert_eq!(task_name_from_text("İstanbul").as_deref(), Some("istanbul"));
        assert_eq!(task_name_from_text("Ångström").as_deref(), Some("angstrom"));
    }

    #[test]
    fn runs_collapse_and_trim() {
        assert_eq!(
            task_name_from_text("  API survey!! -- v2 ").as_deref(),
            Some("api_survey_v2")
        );
        assert_eq!(task_name_from_text("__a__b__").as_deref(), Some("a_b"));
        assert_eq!(task_name_from_text("a\nb\tc").as_deref(), Some("a_b_c"));
        assert_eq!(task_name_from_text("日本語 test").as_deref(), Some("test"));
        assert_eq!(
            task_name_from_text("Fix auth.rs").as_deref(),
            Some("fix_auth_rs")
        );
    }

    #[test]
    fn empty_is_none() {
        for t in ["", "   ", "___", "!!!", "日本語", "\u{301}", "😀"] {
            assert_eq!(task_name_from_text(t), None, "{t:?}");
        }
    }

    #[test]
    fn truncates_to_64_and_retrims() {
        let long = "a".repeat(70);
        assert_eq!(task_name_from_text(&long).unwrap(), "a".repeat(64));
        // Cut lands right after a `_`: the trailing `_` is trimmed again.
        let text = format!("{} b", "a".repeat(63));
        assert_eq!(task_name_from_text(&text).unwrap(), "a".repeat(63));
        let text = format!("{} {}", "a".repeat(62), "b".repeat(10));
        assert_eq!(
            task_name_from_text(&text).unwrap(),
            format!("{}_b", "a".repeat(62))
        );
        for t in [&long, "Café déjà vu", "x", "9 lives"] {
            assert!(is_task_name(&task_name_from_text(t).unwrap()));
        }
    }

    #[test]
    fn suffix_candidates() {
        assert_eq!(task_name_with_suffix("alpha", 1), "alpha");
        assert_eq!(task_name_with_suffix("alpha", 2), "alpha_2");
        assert_eq!(task_name_with_suffix("alpha", 10_000), "alpha_10000");
        let base = "a".repeat(64);
        assert_eq!(
            task_name_with_suffix(&base, 2),
            format!("{}_2", "a".repeat(62))
        );
        assert_eq!(
            task_name_with_suffix(&base, 10),
            format!("{}_10", "a".repeat(61))
        );
        assert_eq!(
            task_name_with_suffix(&base, 10_000),
            format!("{}_10000", "a".repeat(58))
        );
        // The cut stem's trailing `_` is trimmed before the suffix.
        let base = format!("{}_bb", "a".repeat(61));
        assert_eq!(base.len(), 64);
        assert_eq!(
            task_name_with_suffix(&base, 2),
            format!("{}_2", "a".repeat(61))
        );
        for n in [1, 2, 9, 10, 99, 100, 10_000] {
            let c = task_name_with_suffix(&"z".repeat(64), n);
            assert!(c.len() <= 64 && is_task_name(&c), "{c}");
        }
    }

    #[test]
    fn unique_probes_in_order() {
        let probed = RefCell::new(Vec::new());
        let taken: HashSet<&str> = ["alpha", "alpha_2"].into();
        let got = unique_task_name("alpha", |c| {
            probed.borrow_mut().push(c.to_string());
            taken.contains(c)
        });
        assert_eq!(got.as_deref(), Some("alpha_3"));
        assert_eq!(*probed.borrow(), ["alpha", "alpha_2", "alpha_3"]);

        assert_eq!(unique_task_name("free", |_| false).as_deref(), Some("free"));
        let got = unique_task_name("alpha", |c| c == "alpha");
        assert_eq!(got.as_deref(), Some("alpha_2"));
    }

    #[test]
    fn unique_cuts_long_stems() {
        let base = "b".repeat(64);
        let got = unique_task_name(&base, |c| c == base).unwrap();
        assert_eq!(got, format!("{}_2", "b".repeat(62)));
        assert_eq!(got.len(), 64);
    }

    #[test]
    fn unique_falls_back_to_ids_then_none() {
        let count = RefCell::new(0u32);
        let got = unique_task_name("alpha", |c| {
            *count.borrow_mut() += 1;
            !c.starts_with("thread_")
        })
        .unwrap();
        assert_eq!(*count.borrow(), SUFFIX_ATTEMPTS + 1);
        assert!(got.len() == 13 && is_task_name(&got), "{got}");
        assert!(got[7..].bytes().all(|b| b.is_ascii_hexdigit()));

        let count = RefCell::new(0u32);
        let got = unique_task_name("alpha", |_| {
            *count.borrow_mut() += 1;
            true
        });
        assert_eq!(got, None);
        assert_eq!(*count.borrow(), SUFFIX_ATTEMPTS + ID_FALLBACK_ATTEMPTS);

        let e = unique_name_error("/root/a");
        assert_eq!(
            e.message,
            "Unable to generate a unique taskName under /root/a. Repair: provide an explicit unique start.taskName."
        );
        assert!(e.message.contains("Repair:"));
    }

    #[test]
    fn base_names() {
        assert_eq!(
            base_task_name(Some("API Survey"), Some("ignored"), "abc123"),
            "api_survey"
        );
        assert_eq!(
            base_task_name(Some("!!!"), Some("Inspect tests"), "abc123"),
            "inspect_tests"
        );
        assert_eq!(
            base_task_name(None, Some("日本"), "abc123"),
            "thread_abc123"
        );
        assert_eq!(base_task_name(None, None, "abc123"), "thread_abc123");
        assert_eq!(short_id("thread_0123456789ab"), "012345");
        assert_eq!(
            base_task_name(None, None, short_id("thread_0123456789ab")),
            "thread_012345"
        );
    }

    #[test]
    fn display_names() {
        assert_eq!(
            display_name(Some("API survey"), Some("x"), Some("t"), "abc123"),
            "API survey"
        );
        assert_eq!(
            display_name(
                None,
                Some("\n  ---\n\n  Fix   the\tauth  bug \nmore"),
                None,
                "a"
            ),
            "Fix the auth bug"
        );
        assert_eq!(
            display_name(None, Some("### 日本語\n"), None, "a"),
            "### 日本語"
        );
        assert_eq!(
            display_name(None, Some("--- \n ***"), Some("api_survey_2"), "abc123"),
            "api survey 2"
        );
        assert_eq!(display_name(None, None, None, "abc123"), "thread_abc123");
        assert_eq!(
            display_name(None, Some("\r\n"), None, "abc123"),
            "thread_abc123"
        );
        // CRLF lines lose the `\r` through whitespace collapsing.
        assert_eq!(display_name(None, Some("hi\r\nthere"), None, "a"), "hi");
    }

    #[test]
    fn display_name_cut_at_80_utf16_units() {
        let exact = "a".repeat(80);
        assert_eq!(display_name(None, Some(&exact), None, "x"), exact);
        let long = "a".repeat(81);
        let got = display_name(None, Some(&long), None, "x");
        assert_eq!(got, format!("{}...", "a".repeat(77)));
        assert_eq!(utf16_len(&got), 80);
        // 40 emoji = 80 UTF-16 units: fits.
        let emoji = format!("a{}", "😀".repeat(39));
        assert_eq!(utf16_len(&emoji), 79);
        assert_eq!(display_name(None, Some(&emoji), None, "x"), emoji);
        // 41 emoji = 82 units: cut to at most 77 units without splitting a pair.
        let emoji = format!("a{}", "😀".repeat(41));
        let got = display_name(None, Some(&emoji), None, "x");
        assert_eq!(got, format!("a{}...", "😀".repeat(38)));
        assert!(utf16_len(&got) <= 80);
        // The head is end-trimmed before the ellipsis.
        let spaced = format!("{} {}", "a".repeat(76), "b".repeat(20));
        assert_eq!(
            display_name(None, Some(&spaced), None, "x"),
            format!("{}...", "a".repeat(76))
        );
    }

    #[test]
    fn fork_names() {
        assert_eq!(fork_name(Some("API survey")), "Fork of API survey");
        assert_eq!(fork_name(None), "Fork of current session");
        assert_eq!(
            task_name_from_text(&fork_name(None)).as_deref(),
            Some("fork_of_current_session")
        );
    }
}
