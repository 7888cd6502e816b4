//! Text limits as the contracts count them: character limits in UTF-16 code units (what
//! JavaScript's `length` counts), byte limits in UTF-8 bytes.

/// Length in UTF-16 code units.
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// The longest prefix of `s` with at most `units` UTF-16 code units (never splits a char).
pub fn utf16_prefix(s: &str, units: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += c.len_utf16();
        if used > units {
            return &s[..i];
        }
    }
    s
}

/// The longest suffix of `s` with at most `units` UTF-16 code units.
pub fn utf16_suffix(s: &str, units: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices().rev() {
        used += c.len_utf16();
        if used > units {
            return &s[i + c.len_utf8()..];
        }
    }
    s
}

/// The longest suffix of `s` of at most `bytes` UTF-8 bytes, starting on a char boundary.
pub fn byte_suffix(s: &str, bytes: usize) -> &str {
    if s.len() <= bytes {
        return s;
    }
    let mut start = s.len() - bytes;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Retained text: at most `limit` units, else the head plus
/// `\n[truncated N chars for memory retention]`.
pub fn retain(s: &str, limit: usize) -> String {
    let len = utf16_len(s);
    if len <= limit {
        return s.to_string();
    }
    format!(
        "{}\n[truncated {} chars for memory retention]",
        utf16_prefix(s, limit),
        len - limit
    )
}

/// `slice(0, limit - 1) + "…"` when longer than `limit` units.
pub fn truncate_ellipsis(s: &str, limit: usize) -> String {
    if utf16_len(s) <= limit {
        return s.to_string();
    }
    format!("{}…", utf16_prefix(s, limit.saturating_sub(1)))
}

/// Trimmed, with every run of whitespace turned into one space.
pub fn compact(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_like_javascript() {
        assert_eq!(utf16_len("a😀"), 3);
        assert_eq!(utf16_prefix("a😀b", 2), "a");
        assert_eq!(utf16_suffix("a😀b", 3), "😀b");
        assert_eq!(byte_suffix("héllo", 4), "llo");
        assert_eq!(truncate_ellipsis("abcdef", 4), "abc…");
        assert_eq!(truncate_ellipsis("abcd", 4), "abcd");
        assert_eq!(
            retain("abcdef", 4),
            "abcd\n[truncated 2 chars for memory retention]"
        );
        assert_eq!(compact("  a \n\t b  "), "a b");
    }
}
