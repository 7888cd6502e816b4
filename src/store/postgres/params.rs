//! A query's parameters as PostgreSQL numbers them.
//!
//! The files of `sql/` (and `sql/postgres/`) write parameters as SQLite does: `?N`, `?`,
//! `:name` (also `@name` and `$name`). PostgreSQL knows only `$N`, and in SQLite `$N` would be a
//! *name*, not a position, so the files never use it; [`positional`] rewrites each parameter to
//! the `$N` that SQLite gives it, by SQLite's own numbering:
//!
//! - `?N` is position N;
//! - `?` is one more than the largest position so far;
//! - a name is, at its first use, one more than the largest position so far, and keeps that
//!   position at every later use.
//!
//! So a value bound by position, or by name at the position SQLite's
//! `sqlite3_bind_parameter_index` gives it, lands in the same parameter on both backends.
//! What is not code is left alone: string literals (`'…'`, `''` inside, and `E'…'` with its
//! backslash escapes), quoted identifiers (`"…"`, `` `…` ``), comments (`-- …` and `/* … */`)
//! and PostgreSQL's `::` cast.

/// A statement with its parameters as `$1`, `$2`, … and the name SQLite gives each position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Positional {
    /// The statement, each parameter replaced by `$N`.
    pub sql: String,
    /// For each position (index 0 is `$1`): the parameter's name with its prefix (`:id`, as
    /// rusqlite's `named_params!` spells it) when the statement names it there, `None` for a
    /// numbered one (`?N`, `?`) or a position the statement never uses.
    pub names: Vec<Option<String>>,
}

impl Positional {
    /// The position (1-based, as in `$N`) of the parameter named `name` (`:id`), if any.
    pub fn position_of(&self, name: &str) -> Option<usize> {
        self.names
            .iter()
            .position(|n| n.as_deref() == Some(name))
            .map(|i| i + 1)
    }
}

/// `sql` with every SQLite parameter replaced by PostgreSQL's `$N` (see the module's doc).
pub fn positional(sql: &str) -> Positional {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 8);
    let mut names: Vec<Option<String>> = Vec::new();
    // `copied` is where the text not yet copied to `out` starts.
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        match b[i] {
            b'\'' => {
                // E'…' (PostgreSQL) takes backslash escapes.
                let escapes =
                    i > 0 && matches!(b[i - 1], b'E' | b'e') && (i < 2 || !is_name_byte(b[i - 2]));
                i = skip_quoted(b, i, b'\'', escapes);
            }
            b'"' | b'`' => i = skip_quoted(b, i, b[i], false),
            b'-' if b.get(i + 1) == Some(&b'-') => {
                i = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |n| i + n);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = sql[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
            }
            b':' if b.get(i + 1) == Some(&b':') => i += 2,
            b'?' => {
                let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                let at = if digits == 0 {
                    names.len() + 1
                } else {
                    sql[i + 1..i + 1 + digits].parse().unwrap_or(usize::MAX)
                };
                if at == 0 || at == usize::MAX {
                    // `?0` or a number past any bound: not a parameter SQLite accepts either;
                    // left as written, so PostgreSQL's error names it.
                    i += 1 + digits;
                    continue;
                }
                if names.len() < at {
                    names.resize(at, None);
                }
                out.push_str(&sql[copied..i]);
                out.push('$');
                out.push_str(&at.to_string());
                i += 1 + digits;
                copied = i;
            }
            b':' | b'@' | b'$' if b.get(i + 1).is_some_and(|&c| is_name_byte(c)) => {
                let len = 1 + b[i + 1..].iter().take_while(|&&c| is_name_byte(c)).count();
                let name = &sql[i..i + len];
                let at = match names.iter().position(|n| n.as_deref() == Some(name)) {
                    Some(p) => p + 1,
                    None => {
                        names.push(Some(name.to_owned()));
                        names.len()
                    }
                };
                out.push_str(&sql[copied..i]);
                out.push('$');
                out.push_str(&at.to_string());
                i += len;
                copied = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    Positional { sql: out, names }
}

/// A byte of a parameter's name (SQLite's identifier characters; any byte of a multibyte UTF-8
/// character counts, as in SQLite).
fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The index just past the quoted text that starts at `start` (its opening `quote`); a doubled
/// quote stays inside, and so does a backslash-escaped one when `escapes`. An unterminated one
/// runs to the end.
fn skip_quoted(b: &[u8], start: usize, quote: u8, escapes: bool) -> usize {
    let mut i = start + 1;
    while i < b.len() {
        if escapes && b[i] == b'\\' {
            i += 2;
        } else if b[i] == quote {
            if b.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return i + 1;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(s: &str) -> String {
        positional(s).sql
    }

    #[test]
    fn numbered_parameters_keep_their_positions() {
        let p = positional("SELECT * FROM t WHERE a = ?1 AND b = ?2 OR c = ?1");
        assert_eq!(p.sql, "SELECT * FROM t WHERE a = $1 AND b = $2 OR c = $1");
        assert_eq!(p.names, vec![None, None]);
        assert_eq!(sql("SELECT ?10, ?2"), "SELECT $10, $2");
        assert_eq!(positional("SELECT ?3").names.len(), 3);
    }

    #[test]
    fn bare_question_marks_count_on_from_the_largest_position() {
        assert_eq!(sql("VALUES (?, ?, ?)"), "VALUES ($1, $2, $3)");
        assert_eq!(sql("VALUES (?5, ?, ?2, ?)"), "VALUES ($5, $6, $2, $7)");
    }

    #[test]
    fn names_get_the_position_sqlite_gives_them() {
        let p = positional("UPDATE t SET a = :a, b = :b WHERE id = :id AND a <> :a");
        assert_eq!(
            p.sql,
            "UPDATE t SET a = $1, b = $2 WHERE id = $3 AND a <> $1"
        );
        assert_eq!(
            p.names,
            vec![Some(":a".into()), Some(":b".into()), Some(":id".into())]
        );
        assert_eq!(p.position_of(":id"), Some(3));
        assert_eq!(p.position_of(":nope"), None);
        // Mixed: a name takes the position after the largest so far.
        let p = positional("SELECT ?2, :x, @y, $z, ?");
        assert_eq!(p.sql, "SELECT $2, $3, $4, $5, $6");
        assert_eq!(p.position_of("@y"), Some(4));
        assert_eq!(p.position_of("$z"), Some(5));
    }

    #[test]
    fn literals_identifiers_and_comments_are_left_alone() {
        assert_eq!(
            sql("SELECT '?1 :a', 'it''s ?', \"col?\" , `x:y` FROM t WHERE a = ?1"),
            "SELECT '?1 :a', 'it''s ?', \"col?\" , `x:y` FROM t WHERE a = $1"
        );
        assert_eq!(
            sql("-- the row by ?1 (:id)\nSELECT a /* ? :b */ FROM t WHERE id = :id -- ?9"),
            "-- the row by ?1 (:id)\nSELECT a /* ? :b */ FROM t WHERE id = $1 -- ?9"
        );
        assert_eq!(
            sql("SELECT E'a\\'?', ?1, name'?'"),
            "SELECT E'a\\'?', $1, name'?'"
        );
        // A JSON text in a literal, and an unterminated literal or comment, run as written.
        assert_eq!(sql("SELECT '{\"a\":1}', ?1"), "SELECT '{\"a\":1}', $1");
        assert_eq!(sql("SELECT ?1, 'open ?"), "SELECT $1, 'open ?");
        assert_eq!(sql("SELECT ?1 /* open :x"), "SELECT $1 /* open :x");
    }

    #[test]
    fn casts_and_lone_signs_are_not_parameters() {
        assert_eq!(
            sql("SELECT ?1::jsonb, x::text, :a::bigint"),
            "SELECT $1::jsonb, x::text, $2::bigint"
        );
        assert_eq!(
            sql("SELECT a ? b, 1 : 2, '$', $ 1"),
            "SELECT a $1 b, 1 : 2, '$', $ 1"
        );
        assert_eq!(sql("SELECT ?0"), "SELECT ?0");
        assert_eq!(sql("SELECT :é, ?1"), "SELECT $1, $1");
    }

    #[test]
    fn text_without_parameters_is_unchanged() {
        let s = "SELECT count(*) FROM threads WHERE status = 'live'";
        assert_eq!(
            positional(s),
            Positional {
                sql: s.into(),
                names: vec![]
            }
        );
    }
}
