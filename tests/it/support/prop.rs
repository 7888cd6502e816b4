//! What the property tests share: their proptest configuration, contract A's path order and
//! the model of how a reference text names a path.

use std::cmp::Ordering;

use proptest::prelude::ProptestConfig;

/// 64 cases unless `PROPTEST_CASES` says otherwise.
pub fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// JavaScript `localeCompare` on contract A's alphabet (reference/contract-semantics.md,
/// Traps): `_` < `/` < digits < letters, a proper prefix first.
pub fn locale_cmp(a: &str, b: &str) -> Ordering {
    fn rank(c: char) -> (u8, char) {
        match c {
            '_' => (0, c),
            '/' => (1, c),
            '0'..='9' => (2, c),
            'a'..='z' => (3, c),
            _ => panic!("{c:?} is not in contract A's path alphabet"),
        }
    }
    a.chars().map(rank).cmp(b.chars().map(rank))
}

/// Contract A's reference resolution, step 2 (reference/contract-semantics.md §1.4), as a
/// model: the path a reference text names (absolute, `root/…`, or one or several segments
/// appended to `current`), if `canonical` (the caller's model of a canonical path) accepts it.
pub fn model_reference_path(
    text: &str,
    current: &str,
    canonical: impl Fn(&str) -> bool,
) -> Option<String> {
    let candidate = if text.starts_with('/') {
        text.to_string()
    } else if text.starts_with("root/") {
        format!("/{text}")
    } else {
        format!("{current}/{text}")
    };
    canonical(&candidate).then_some(candidate)
}
