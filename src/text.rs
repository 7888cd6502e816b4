//! Text limits as the contracts count them: character limits in UTF-16 code units (what
//! JavaScript's `length` counts), byte limits in UTF-8 bytes; and the text of contract A's
//! notices, which every writer of one (the runtime's, the restore pass) shares.

use crate::domain::ExitKind;

/// Length in UTF-16 code units: one per character, two for one outside the BMP (a 4-byte
/// UTF-8 sequence, whose lead byte is >= 0xF0). ASCII text is its byte length.
pub fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        return s.len();
    }
    s.chars().count() + s.bytes().filter(|&b| b >= 0xF0).count()
}

/// The longest prefix of `s` with at most `units` UTF-16 code units (never splits a char).
pub fn utf16_prefix(s: &str, units: usize) -> &str {
    let end = units.min(s.len());
    if s.as_bytes()[..end].is_ascii() && s.is_char_boundary(end) {
        // `end` ASCII characters, one unit each; the next character (if any) would not fit.
        return &s[..end];
    }
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
/// turned into one space.
pub fn compact(s: &str) -> String {
    compact_upto(s, usize::MAX)
}

/// `truncate_ellipsis(&compact(s), limit)`, without compacting more than it keeps.
pub fn compact_cut(s: &str, limit: usize) -> String {
    truncate_ellipsis_owned(compact_upto(s, limit), limit)
}

/// [`compact_cut`], and whether it cut anything (the text is then shorter than the whole
/// compacted text).
pub fn compact_cut_flagged(s: &str, limit: usize) -> (String, bool) {
    let c = compact_upto(s, limit);
    if fits(&c, limit) {
        (c, false)
    } else {
        (truncate_ellipsis(&c, limit), true)
    }
}

/// How each byte starts: 0 not whitespace, 1 ASCII whitespace (`\t`..=`\r`, space), 2 the lead
/// byte of a multi-byte character that may be whitespace (U+0085, U+00A0, U+1680,
/// U+2000..U+205F, U+3000).
const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 9;
    while b <= 13 {
        t[b] = 1;
        b += 1;
    }
    t[b' ' as usize] = 1;
    t[0xC2] = 2;
    t[0xE1] = 2;
    t[0xE2] = 2;
    t[0xE3] = 2;
    t
};

/// True when compacting cannot change `b`: no whitespace but single spaces between words, and
/// no byte that may start non-ASCII whitespace. Written without early exits, so it
/// vectorizes; a text it is unsure of takes the careful path.
fn is_compact(b: &[u8]) -> bool {
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
        return true;
    };
    let odd = b.iter().fold(0u8, |acc, &x| {
        acc | u8::from(x.wrapping_sub(9) < 5)
            | u8::from(x == 0xC2)
            | u8::from(x.wrapping_sub(0xE1) < 3)
    });
    let doubled = b
        .iter()
        .zip(&b[1..])
        .fold(0u8, |acc, (&x, &y)| acc | u8::from(x == b' ' && y == b' '));
    odd == 0 && doubled == 0 && first != b' ' && last != b' '
}

/// The length of the whitespace character at byte `i` (0: none).
#[inline]
fn whitespace_at(s: &str, i: usize) -> usize {
    match s.as_bytes().get(i).map(|b| CLASS[*b as usize]) {
        None | Some(0) => 0,
        Some(1) => 1,
        Some(_) => match s[i..].chars().next() {
            Some(c) if c.is_whitespace() => c.len_utf8(),
            _ => 0,
        },
    }
}

/// The compacted text, or (once it would hold more than `limit` UTF-16 units) a prefix of it
/// holding more than `limit` units. Text between the places where compaction changes
/// something (a run of whitespace, whitespace other than one space, the ends) is copied a run
/// at a time.
fn compact_upto(s: &str, limit: usize) -> String {
    if is_compact(s.as_bytes()) {
        // More than `limit` units when `s` has them (a character is at most 2 units).
        return utf16_prefix(s, limit.saturating_add(2)).to_string();
    }
    let bytes = s.as_bytes();
    let n = bytes.len();
    let mut out = String::with_capacity(n.min(limit.saturating_mul(4).saturating_add(8)));
    let mut units = 0usize;
    let mut i = 0;
    while whitespace_at(s, i) > 0 {
        i += whitespace_at(s, i);
    }
    let mut run = i;
    // A run is handed over once it is one byte longer than the units the limit has left (it
    // may then hold more units than are left; a unit is at least one byte), so a long text
    // stops soon after the limit.
    let budget = |units: usize| limit.saturating_sub(units).saturating_add(1);
    let mut flush_at = run.saturating_add(budget(0));
    loop {
        // Everything up to the next byte that may start whitespace is kept as it is.
        let stop = n.min(flush_at);
        while i < stop && CLASS[bytes[i] as usize] == 0 {
            i += 1;
        }
        if i >= n {
            break;
        }
        if i >= flush_at {
            if s.is_char_boundary(i) {
                let piece = &s[run..i];
                units += utf16_len(piece);
                out.push_str(piece);
                run = i;
                if units > limit {
                    return out;
                }
                flush_at = i.saturating_add(budget(units));
            } else {
                i += 1;
            }
            continue;
        }
        let w = whitespace_at(s, i);
        if w == 0 || (bytes[i] == b' ' && whitespace_at(s, i + 1) == 0 && i + 1 < n) {
            // Not whitespace after all, or one plain space between two words: kept.
            i += 1;
            continue;
        }
        let piece = &s[run..i];
        units += utf16_len(piece);
        out.push_str(piece);
        while whitespace_at(s, i) > 0 {
            i += whitespace_at(s, i);
        }
        if i < n {
            out.push(' ');
            units += 1;
        }
        run = i;
        if units > limit {
            return out;
        }
        flush_at = i.saturating_add(budget(units));
    }
    out.push_str(&s[run..]);
    out
}

/// A short token count: `950`, `12.3k`, `4.56M`, `1.20G` (`threadbase usage`'s and `top`'s
/// narrow columns, and contract A's texts).
pub fn compact_count(n: i64) -> String {
    let x = n as f64;
    match n {
        ..=999 => n.to_string(),
        1_000..=999_949 => format!("{:.1}k", x / 1e3),
        999_950..=999_994_999 => format!("{:.2}M", x / 1e6),
        _ => format!("{:.2}G", x / 1e9),
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// How many lines of a thread's answer a notice quotes, and how long each may be (UTF-16
/// units, as the contracts count).
pub const NOTICE_ANSWER_LINES: usize = 6;
pub const NOTICE_LINE_UNITS: usize = 200;

/// The text of contract A's notice for a thread's parent session: its title, path and state
/// in words, what happened (finished its turn, exited, failed, was stopped, was closed as
/// stale) with the exit's message, and the first lines of its answer; when the answer is
/// longer than what is quoted, where to read the rest.
pub fn thread_notice_text(
    title: &str,
    path: &str,
    state: &str,
    exit_kind: Option<ExitKind>,
    exit_message: Option<&str>,
    answer: Option<&str>,
) -> String {
    let what = match (state.starts_with("closed/"), exit_kind) {
        (false, _) if state == "live/failed" => "failed its turn",
        (false, _) => "finished its turn",
        (true, Some(ExitKind::Stopped)) => "was stopped",
        (true, Some(ExitKind::Stale)) => "was closed as stale",
        (true, _) if state == "closed/failed" => "failed",
        (true, _) => "exited",
    };
    let mut text = format!("Thread \"{title}\" ({path}) {what}: {state}.");
    if let Some(m) = exit_message.filter(|m| !m.trim().is_empty()) {
        text.push(' ');
        text.push_str(m.trim());
        if !m.trim_end().ends_with('.') {
            text.push('.');
        }
    }
    let answer = answer.map(str::trim).filter(|a| !a.is_empty());
    let Some(answer) = answer else {
        return text;
    };
    text.push_str(if what == "finished its turn" {
        "\nAnswer:"
    } else {
        "\nLast answer:"
    });
    let mut cut = false;
    let lines: Vec<&str> = answer.lines().collect();
    for line in lines.iter().take(NOTICE_ANSWER_LINES) {
        let kept = utf16_prefix(line, NOTICE_LINE_UNITS);
        text.push('\n');
        text.push_str(kept);
        if kept.len() < line.len() {
            text.push('…');
            cut = true;
        }
    }
    if cut || lines.len() > NOTICE_ANSWER_LINES {
        text.push_str(&format!("\n… (poll {path} for the whole answer)"));
    }
    text
}

/// The notice a contract B parent gets when its child asks a question (`THREADBASE_UI=parent`,
/// issue 30): who asks what, and how to answer.
pub fn question_notice_text(
    path: &str,
    kind: &str,
    title: Option<&str>,
    options: Option<&[String]>,
) -> String {
    let mut s = format!("{path} asks ({kind})");
    if let Some(t) = title.filter(|t| !t.trim().is_empty()) {
        s.push_str(": ");
        s.push_str(t);
    }
    if let Some(o) = options {
        s.push_str(&format!(" [options: {}]", o.join(" | ")));
    }
    s.push_str(&format!(
        ". It waits for the answer: the thread_answer tool {{\"id\": \"{path}\", \"answer\": …}}, or `threadbase answer {path} VALUE`."
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_like_javascript() {
        assert_eq!(utf16_len("a😀"), 3);
        assert_eq!(utf16_prefix("a😀b", 2), "a");
        assert_eq!(utf16_prefix("ab😀", 2), "ab");
        assert_eq!(utf16_prefix("abc", 5), "abc");
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
            for units in [0, 1, 2, 3, 7, 40] {
                let mut used = 0;
                let want: String = t.chars().take_while(|c| { used += c.len_utf16(); used <= units }).collect();
                proptest::prop_assert_eq!(utf16_prefix(&t, units), want.as_str());
            }
            let plain_compact = t.split_whitespace().collect::<Vec<_>>().join(" ");
            proptest::prop_assert_eq!(compact(&t), plain_compact.clone());
            for limit in [0, 1, 2, 3, 5, 8, 13] {
                proptest::prop_assert_eq!(compact_cut(&t, limit), truncate_ellipsis(&plain_compact, limit));
            }
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
