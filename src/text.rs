//! Text limits as the contracts count them: character limits in UTF-16 code units (what
//! JavaScript's `length` counts), byte limits in UTF-8 bytes.

/// Length in UTF-16 code units: one per character, two for one outside the BMP (a 4-byte
/// UTF-8 sequence). Counted over the bytes, so it vectorizes: every byte that is not a
/// continuation byte starts a character, and a lead byte >= 0xF0 starts a 4-byte one.
pub fn utf16_len(s: &str) -> usize {
    s.bytes()
        .map(|b| usize::from(b & 0xC0 != 0x80) + usize::from(b >= 0xF0))
        .sum()
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
    if fits(s, limit) {
        return s.to_string();
    }
    format!("{}…", utf16_prefix(s, limit.saturating_sub(1)))
}

/// [`truncate_ellipsis`] of a text already owned: returned as it is when it fits.
pub fn truncate_ellipsis_owned(s: String, limit: usize) -> String {
    if fits(&s, limit) {
        s
    } else {
        truncate_ellipsis(&s, limit)
    }
}

/// At most `limit` UTF-16 units (a text never has more units than bytes).
fn fits(s: &str, limit: usize) -> bool {
    s.len() <= limit || utf16_len(s) <= limit
}

/// Trimmed, with every run of whitespace (Unicode `White_Space`, as `char::is_whitespace`)
/// turned into one space. One pass over the bytes; only non-ASCII characters are decoded.
pub fn compact(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let bytes = s.as_bytes();
    let (mut i, mut word) = (0, None::<usize>);
    let mut pending_space = false;
    while i < bytes.len() {
        let b = bytes[i];
        let (space, width) = if b < 0x80 {
            (matches!(b, b'\t'..=b'\r' | b' '), 1)
        } else {
            let c = s[i..].chars().next().unwrap_or(' ');
            (c.is_whitespace(), c.len_utf8())
        };
        match (space, word) {
            (true, Some(start)) => {
                if pending_space {
                    out.push(' ');
                }
                out.push_str(&s[start..i]);
                pending_space = true;
                word = None;
            }
            (false, None) => word = Some(i),
            _ => {}
        }
        i += width;
    }
    if let Some(start) = word {
        if pending_space {
            out.push(' ');
        }
        out.push_str(&s[start..]);
    }
    out
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

    proptest::proptest! {
        #[test]
        fn compact_and_length_match_the_plain_definitions(t in "(\\PC|\\s|\u{85}|\u{A0}|\u{1F600}){0,40}") {
            let plain: usize = t.chars().map(char::len_utf16).sum();
            proptest::prop_assert_eq!(utf16_len(&t), plain);
            proptest::prop_assert_eq!(compact(&t), t.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }

    #[test]
    fn fast_paths_agree_with_the_plain_definitions() {
        let texts = [
            "",
            " ",
            "plain words here",
            "  lead\u{0B}vt\u{0C}ff\r\ncrlf  ",
            "nbsp\u{A0}and\u{85}nel\u{2028}ls\u{3000}ideo",
            "é😀 mixed\u{2003}em  ünïcödé\t",
            "\u{1F600}\u{1F600}",
            "x\u{1C}y",
        ];
        for t in texts {
            let plain: usize = t.chars().map(char::len_utf16).sum();
            assert_eq!(utf16_len(t), plain, "{t:?}");
            assert_eq!(
                compact(t),
                t.split_whitespace().collect::<Vec<_>>().join(" "),
                "{t:?}"
            );
            for limit in 0..8 {
                assert_eq!(
                    truncate_ellipsis_owned(t.to_string(), limit),
                    truncate_ellipsis(t, limit)
                );
            }
        }
    }
}
