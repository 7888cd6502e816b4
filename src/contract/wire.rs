//! The form results take on serve's pipe (`serve --wire`).
//!
//! `contract` (the default) writes every result exactly as its contract shapes it. `compact`
//! is for a client that rebuilds the rest, the Pi extension (`pi-extension/serve.ts`,
//! `withAliases`), and exists for the `extension/list_*` rows of `benches/serve.rs` (issue 27:
//! what the model pays is the extension's tool call, whose decode and parse grow with the
//! bytes):
//! - contract A's `list` sends its snapshots once, in part lines `{"id", "part": [snapshot, …]}`
//!   of at most about 64 KiB right before the response line (`contract::list_answer`), whose
//!   `details.threads` and `details.snapshots` (its alias) are the placeholder `0`; each listed
//!   snapshot's `resultSummary` (always its `result.text`) is `0` too. The client sets them in
//!   place (every key keeps its position, no object is rebuilt), so a list's threads cross the
//!   pipe once and about 40% smaller, and no line is long enough for Node's large-object space;
//! - results are ASCII: every other character is a `\uXXXX` escape, the same JSON value. Node
//!   decodes an ASCII line into a one-byte string about 4× faster than UTF-8 with a few
//!   non-ASCII characters in it (measured on a 234 kB list: 718 µs against 178 µs).

use std::io::{self, Write};

/// How much of a result serve writes on its pipe (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Wire {
    #[default]
    Contract,
    Compact,
}

/// A writer that passes JSON text on with every non-ASCII character as a `\uXXXX` escape (two,
/// a surrogate pair, past U+FFFF). Outside strings JSON text is ASCII, so every such
/// character stands inside a string, where its escape means the same character. A character
/// whose bytes are split between two writes is kept until the rest comes.
pub struct Ascii<W: Write> {
    inner: W,
    /// The first bytes of a character split between writes.
    carry: Vec<u8>,
}

impl<W: Write> Ascii<W> {
    pub fn new(inner: W) -> Ascii<W> {
        Ascii {
            inner,
            carry: Vec::new(),
        }
    }

    /// The inner writer; an unfinished character at the end is an error.
    pub fn finish(self) -> io::Result<W> {
        if self.carry.is_empty() {
            Ok(self.inner)
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "JSON text ended inside a UTF-8 character",
            ))
        }
    }

    fn escape(&mut self, c: char) -> io::Result<()> {
        let mut units = [0u16; 2];
        for u in c.encode_utf16(&mut units) {
            write!(self.inner, "\\u{u:04x}")?;
        }
        Ok(())
    }

    /// Writes `bytes`; a character cut short by their end waits in `carry`.
    fn pass(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        loop {
            let ascii = first_non_ascii(bytes);
            self.inner.write_all(&bytes[..ascii])?;
            bytes = &bytes[ascii..];
            let Some(&lead) = bytes.first() else {
                return Ok(());
            };
            let width = utf8_width(lead);
            if bytes.len() < width {
                self.carry.extend_from_slice(bytes);
                return Ok(());
            }
            self.escape(one_char(&bytes[..width])?)?;
            bytes = &bytes[width..];
        }
    }
}

impl<W: Write> Write for Ascii<W> {
    fn write(&mut self, mut buf: &[u8]) -> io::Result<usize> {
        let n = buf.len();
        if let Some(&lead) = self.carry.first() {
            let width = utf8_width(lead);
            let need = (width - self.carry.len()).min(buf.len());
            self.carry.extend_from_slice(&buf[..need]);
            buf = &buf[need..];
            if self.carry.len() < width {
                return Ok(n);
            }
            let joined = std::mem::take(&mut self.carry);
            self.escape(one_char(&joined)?)?;
        }
        self.pass(buf)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Where the first non-ASCII byte of `bytes` is (its length when there is none): 64 bytes at a
/// time while they are ASCII (`<[u8]>::is_ascii` tests a word at a time), then byte by byte.
fn first_non_ascii(bytes: &[u8]) -> usize {
    let mut i = 0;
    for chunk in bytes.chunks_exact(64) {
        if !chunk.is_ascii() {
            break;
        }
        i += 64;
    }
    i + bytes[i..]
        .iter()
        .position(|b| !b.is_ascii())
        .unwrap_or(bytes.len() - i)
}

/// A UTF-8 character's length from its first byte (1 for a byte no character starts with:
/// `one_char` then refuses it).
fn utf8_width(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// The one character `bytes` encodes.
fn one_char(bytes: &[u8]) -> io::Result<char> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.chars().next())
        .filter(|c| c.len_utf8() == bytes.len())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "JSON text that is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the text and however it is cut into writes, the ASCII form is ASCII and parses
    /// to the same JSON value.
    #[test]
    fn the_ascii_form_is_the_same_value_however_it_is_written() {
        let value = serde_json::json!({
            "text": "é 漢字 😀 \u{7f} \u{80} \u{ffff} \u{10000} \"q\" \\ end",
            "list": ["…", "plain", "\u{2028}"],
        });
        let json = serde_json::to_vec(&value).unwrap();
        for cut in 1..=7 {
            let mut w = Ascii::new(Vec::new());
            for piece in json.chunks(cut) {
                w.write_all(piece).unwrap();
            }
            let out = w.finish().unwrap();
            assert!(out.is_ascii(), "cut {cut}");
            let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(back, value, "cut {cut}");
        }
        let mut w = Ascii::new(Vec::new());
        w.write_all(&json).unwrap();
        let out = w.finish().unwrap();
        assert!(out.is_ascii());
        assert!(std::str::from_utf8(&out)
            .unwrap()
            .contains("\\ud83d\\ude00"));
    }

    /// A write that ends inside a character is finished by the next; text that ends there, or
    /// is not UTF-8, is an error, never a panic.
    #[test]
    fn a_character_cut_at_the_end_or_bad_bytes_are_errors() {
        let mut w = Ascii::new(Vec::new());
        w.write_all("\"é".as_bytes().split_at(2).0).unwrap();
        assert!(w.finish().is_err());
        let mut w = Ascii::new(Vec::new());
        assert!(w.write_all(&[b'"', 0xFF, b'"']).is_err());
        let mut w = Ascii::new(Vec::new());
        assert!(w.write_all(&[b'"', 0xC3, b'x']).is_err());
    }
}
