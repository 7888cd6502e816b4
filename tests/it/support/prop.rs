//! What the property tests share: their proptest configuration and contract A's path order.

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
