//! Contract A's `list` answer, one way whatever its length: the listed threads come from the
//! engine a batch at a time ([`ListRows`]), each one its summary snapshot and its line of the
//! content text (rendered here from its facts, [`render`], or kept from an earlier rendering:
//! `engine/cache.rs`), and the batch goes through the serializer straight into the response
//! line. Memory holds one batch of rows and
//! snapshots ([`BATCH`]) and a content text of at most [`format::MAX_LIST_LINES`] lines,
//! whatever the list's length.
//!
//! The contract's form ([`Wire::Contract`]) is `{content: [{text}], details: {threads,
//! snapshots, counts…}}`: the text comes first and ends with the count when it leaves threads
//! out, and the list is written twice (`details.threads` and its alias `details.snapshots`).
//! So a list of one batch is held and written whole; a longer one is counted (its ids and
//! states only) and then read once per copy.
//!
//! With `--wire compact` (see [`crate::contract::wire`]) the list crosses the pipe once, in
//! part lines of at most about [`PART_BYTES`] before the response line, whose `threads` and
//! `snapshots` are the placeholder `0`: one pass, each part line flushed to the client as
//! soon as it is cut, so the client parses one while the next is read.
//!
//! The shape is the typed answer's ([`ToolResult`] around [`Listed`]) serialized with markers
//! where the text and the lists go ([`Template`]), so the bytes are what serializing the whole
//! answer at once gives (a unit test checks it).

use std::io::Write;

use serde_json::Value;

use super::format;
use super::projection::{Detail, Projection, ThreadFacts};
use super::thread::{self, Listed};
use super::{ToolResult, Wire};
use crate::error::{Error, Result};

/// Threads rendered at a time. More than the text's lines, so the text comes from the first
/// batch.
pub const BATCH: usize = 256;
const _: () = assert!(BATCH > format::MAX_LIST_LINES);

/// A compact list's part line holds snapshots up to this many bytes before the ASCII escapes
/// (at least one), so the line stays under 128 KiB: an escape at most triples a character's
/// bytes (`é`, 2 bytes, is `\u00e9`). For the rows `extension/list_ancestor_110` and
/// `extension/list_all` of `benches/serve.rs`: Node makes a string of 128 KiB or more in its
/// large-object space (fresh pages for every line) and concatenates a line's chunks into a
/// fresh buffer; as one line, a list of 110 threads (212 kB) cost the extension 14–16% more in
/// its line reader and `JSON.parse` (the recorded lines fed in 64 KiB chunks, one line against
/// six, interleaved in one process, medians of 2500: 1350 against 1166 µs, 1496 against 1268,
/// 1586 against 1348, 1501 against 1265), while serve's work stays the same (callgrind, 200
/// lists: 329.6M instructions against 328.5M). It also keeps every line far below
/// V8's largest string (about 512 MB, a list of some 250k threads).
pub const PART_BYTES: usize = 40 * 1024;

/// One listed thread: its summary snapshot's JSON, its line of the content text, and whether
/// it is live.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    pub json: String,
    pub line: String,
    pub live: bool,
}

/// A listed thread's snapshot (summary) and line, from its facts.
pub fn render(facts: &ThreadFacts) -> Result<Rendered> {
    let projection = Projection::new(facts, Detail::Summary);
    let snapshot = projection.snapshot();
    let mut line = String::new();
    let _ = format::list_line(&mut line, true, &snapshot);
    Ok(Rendered {
        json: serde_json::to_string(&snapshot)?,
        line,
        live: facts.row.is_live(),
    })
}

/// Where a list's threads come from: one read of the store, in list order (the engine's
/// `list` verb). Every call sees the same rows.
pub trait ListRows {
    /// How many threads the list has, and how many of them are live.
    fn count(&mut self) -> Result<(usize, usize)>;

    /// The listed threads, rendered, in list order, at most [`BATCH`] at a time, to `f`, with
    /// whether it is the last batch (a list that ends on a full batch ends with an empty one;
    /// an empty list is one empty batch). `f` returns whether to go on.
    fn batches(&mut self, f: &mut dyn FnMut(Vec<Rendered>, bool) -> Result<bool>) -> Result<()>;
}

/// Writes the whole response line of request `id` (without its line feed): `{"id": …,
/// "result": …}`, and with [`Wire::Compact`] the part lines before it.
pub fn write(wire: Wire, id: &Value, rows: &mut dyn ListRows, w: &mut dyn Write) -> Result<()> {
    match wire {
        Wire::Contract => contract(id, rows, w),
        Wire::Compact => compact(id, rows, &mut super::wire::Ascii::new(w)),
    }
}

/// The contract's form. The first batch is held: a list of one batch is then known whole
/// and written from it, the list twice, in the same pass (inside the pass: off the worker
/// once long). A longer list stops that pass, is counted (the text, which comes first, says
/// how many it leaves out), and is then read once per copy.
fn contract(id: &Value, rows: &mut dyn ListRows, w: &mut dyn Write) -> Result<()> {
    w.write_all(b"{\"id\":")?;
    serde_json::to_writer(&mut *w, id)?;
    w.write_all(b",\"result\":")?;
    let mut held: Option<Vec<Rendered>> = None;
    let mut whole = false;
    rows.batches(&mut |listed, last| {
        let listed = match held.take() {
            None if !last => {
                held = Some(listed);
                return Ok(true);
            }
            None => listed,
            // The list ended right after its first batch.
            Some(first) if last && listed.is_empty() => first,
            // Longer than a batch.
            Some(_) => return Ok(false),
        };
        let live = listed.iter().filter(|r| r.live).count();
        let t = Template::new(listed.len(), live, Wire::Contract)?;
        w.write_all(t.part(0))?;
        text(&listed, listed.len(), w)?;
        for part in [1, 2] {
            w.write_all(t.part(part))?;
            w.write_all(b"[")?;
            write_snapshots(&listed, true, w)?;
            w.write_all(b"]")?;
        }
        w.write_all(t.last())?;
        w.write_all(b"}")?;
        whole = true;
        Ok(true)
    })?;
    if whole {
        return Ok(());
    }
    let (count, live) = rows.count()?;
    let t = Template::new(count, live, Wire::Contract)?;
    w.write_all(t.part(0))?;
    let mut written = 0;
    rows.batches(&mut |listed, _| {
        if written == 0 {
            text(&listed, count, w)?;
            w.write_all(t.part(1))?;
            w.write_all(b"[")?;
        }
        write_snapshots(&listed, written == 0, w)?;
        written += listed.len();
        Ok(true)
    })?;
    if written != count {
        return Err(Error::internal(format!(
            "a list counted {count} threads and then read {written} in the same read"
        )));
    }
    w.write_all(b"]")?;
    w.write_all(t.part(2))?;
    w.write_all(b"[")?;
    let mut first = true;
    rows.batches(&mut |listed, _| {
        write_snapshots(&listed, first, w)?;
        first = first && listed.is_empty();
        Ok(true)
    })?;
    w.write_all(b"]")?;
    w.write_all(t.last())?;
    w.write_all(b"}")?;
    Ok(())
}

/// The content text as a JSON string: a line for each of the first
/// [`format::MAX_LIST_LINES`] of `first` (the list's first batch), then how many more there
/// are.
fn text(first: &[Rendered], count: usize, w: &mut dyn Write) -> Result<()> {
    let mut text = String::new();
    if count == 0 {
        text.push_str(format::NO_THREADS);
    }
    let mut shown = 0;
    push_lines(&mut text, first, &mut shown);
    push_more(&mut text, shown, count);
    serde_json::to_writer(w, text.as_str())?;
    Ok(())
}

/// The compact form ([`Wire::Compact`], into an ASCII writer): the part lines as the rows
/// come, then the response line with the counts and the text.
fn compact(id: &Value, rows: &mut dyn ListRows, w: &mut dyn Write) -> Result<()> {
    let id = serde_json::to_vec(id)?;
    let (mut count, mut live, mut shown) = (0, 0, 0);
    let mut text = String::new();
    let mut cutter = PartCutter::default();
    let mut done = Vec::new();
    rows.batches(&mut |listed, _| {
        count += listed.len();
        live += listed.iter().filter(|r| r.live).count();
        push_lines(&mut text, &listed, &mut shown);
        cutter.push(&listed, &mut done)?;
        // Each part line goes to the client as soon as it is cut; the last goes with the
        // response line, so a list of one part line is one write.
        write_parts(&mut done, &id, w, true)?;
        Ok(true)
    })?;
    cutter.close(&mut done);
    write_parts(&mut done, &id, w, false)?;
    if count == 0 {
        text.push_str(format::NO_THREADS);
    }
    push_more(&mut text, shown, count);
    let t = Template::new(count, live, Wire::Compact)?;
    w.write_all(b"{\"id\":")?;
    w.write_all(&id)?;
    w.write_all(b",\"result\":")?;
    w.write_all(t.part(0))?;
    serde_json::to_writer(&mut *w, text.as_str())?;
    w.write_all(t.last())?;
    w.write_all(b"}")?;
    Ok(())
}

/// A part line starts with this, then the request's id, then a body from [`PartCutter`].
const PART_HEAD: &[u8] = b"{\"id\":";

/// Writes the part lines whose bodies are in `done`, each flushed when `flush`.
fn write_parts(done: &mut Vec<Vec<u8>>, id: &[u8], w: &mut dyn Write, flush: bool) -> Result<()> {
    for body in done.drain(..) {
        w.write_all(PART_HEAD)?;
        w.write_all(id)?;
        w.write_all(&body)?;
        if flush {
            w.flush()?;
        }
    }
    Ok(())
}

/// Cuts a compact list ([`Wire::Compact`]) into the bodies of its part lines, batch after
/// batch: `,"part":[snapshot,…]}` and a line feed, each holding snapshots up to
/// [`PART_BYTES`] before the ASCII escapes (one at least). Where a body ends depends only on
/// the snapshots, not on the batches.
#[derive(Default)]
struct PartCutter {
    body: Vec<u8>,
}

impl PartCutter {
    const OPEN: &'static [u8] = b",\"part\":[";
    const CLOSE: &'static [u8] = b"]}\n";

    /// Adds `listed`; the bodies it completed go to `done`.
    fn push(&mut self, listed: &[Rendered], done: &mut Vec<Vec<u8>>) -> Result<()> {
        for r in listed {
            if !self.body.is_empty() && self.body.len() + r.json.len() > PART_BYTES {
                self.close(done);
            }
            if self.body.is_empty() {
                self.body.reserve(PART_BYTES + 4096);
                self.body.extend_from_slice(Self::OPEN);
            } else {
                self.body.push(b',');
            }
            write_snapshot(&r.json, Wire::Compact, &mut self.body)?;
        }
        Ok(())
    }

    /// Ends the body under way, if any, into `done`.
    fn close(&mut self, done: &mut Vec<Vec<u8>>) {
        if !self.body.is_empty() {
            self.body.extend_from_slice(Self::CLOSE);
            done.push(std::mem::take(&mut self.body));
        }
    }
}

/// The content text's lines of `listed` (each after a line break unless it is the text's
/// first), while fewer than [`format::MAX_LIST_LINES`] are `shown`.
fn push_lines(text: &mut String, listed: &[Rendered], shown: &mut usize) {
    for r in listed {
        if *shown == format::MAX_LIST_LINES {
            return;
        }
        if *shown > 0 {
            text.push('\n');
        }
        text.push_str(&r.line);
        *shown += 1;
    }
}

/// The content text's last line when it shows `shown` of `count` threads.
fn push_more(text: &mut String, shown: usize, count: usize) {
    if shown < count {
        format::list_more(text, shown, count).expect("a String takes every write");
    }
}

/// The snapshots of `listed`, comma-separated (a leading comma unless this is the list's
/// first batch).
fn write_snapshots(listed: &[Rendered], first: bool, w: &mut dyn Write) -> Result<()> {
    for (i, r) in listed.iter().enumerate() {
        if i > 0 || !first {
            w.write_all(b",")?;
        }
        w.write_all(r.json.as_bytes())?;
    }
    Ok(())
}

/// One listed snapshot in the `wire` form (see [`thread::compact_snapshot`]; the caller makes
/// the compact form ASCII).
fn write_snapshot(json: &str, wire: Wire, w: &mut dyn Write) -> std::io::Result<()> {
    match wire {
        Wire::Contract => w.write_all(json.as_bytes()),
        Wire::Compact => match thread::compact_snapshot(json) {
            None => w.write_all(json.as_bytes()),
            Some((before, after)) => {
                w.write_all(before.as_bytes())?;
                w.write_all(thread::PLACEHOLDER.as_bytes())?;
                w.write_all(after.as_bytes())
            }
        },
    }
}

/// The holes of the template: the text, then the list (twice). Serialized, a marker is a
/// JSON string starting with U+0000, which nothing else in the template holds.
const TEXT_HOLE: &str = "\u{0}text";
const LIST_HOLE: &str = "\u{0}list";

/// The answer's `ToolResult` / `Listed` structs serialized with markers where the text and
/// the lists go, cut at the markers.
struct Template {
    json: String,
    /// Where the text hole and the list holes (two, or none with [`Wire::Compact`]) start and
    /// end.
    holes: Vec<(usize, usize)>,
}

impl Template {
    fn new(count: usize, live: usize, wire: Wire) -> Result<Template> {
        let json = serde_json::to_string(&ToolResult::new(
            TEXT_HOLE,
            Listed::new(LIST_HOLE, count, live, wire),
        ))?;
        let find = |marker: &str, from: usize| -> Result<(usize, usize)> {
            let m = serde_json::to_string(marker)?;
            let at = json[from..]
                .find(&m)
                .map(|i| from + i)
                .ok_or_else(|| Error::internal("the list template lost a hole"))?;
            Ok((at, at + m.len()))
        };
        let text = find(TEXT_HOLE, 0)?;
        let mut holes = vec![text];
        if wire == Wire::Contract {
            let threads = find(LIST_HOLE, text.1)?;
            holes.push(threads);
            holes.push(find(LIST_HOLE, threads.1)?);
        }
        Ok(Template { holes, json })
    }

    /// The template's text before hole `i` (after hole `i - 1`).
    fn part(&self, i: usize) -> &[u8] {
        let from = if i == 0 { 0 } else { self.holes[i - 1].1 };
        let to = self.holes.get(i).map_or(self.json.len(), |h| h.0);
        &self.json.as_bytes()[from..to]
    }

    /// The template's text after its last hole.
    fn last(&self) -> &[u8] {
        self.part(self.holes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ThreadId;
    use crate::store::output::OutputFacts;
    use crate::store::threads::ThreadRow;
    use serde_json::value::RawValue;

    /// `n` threads (every 7th live), with answers that need escapes and ASCII escapes.
    fn facts(n: usize) -> Vec<ThreadFacts> {
        (0..n)
            .map(|i| ThreadFacts {
                row: ThreadRow {
                    id: ThreadId::new(format!("thread_{i:012x}").as_str()),
                    path: format!("/root/t_{i}"),
                    task_name: format!("t_{i}"),
                    name: format!("Thread \"{i}\"\n"),
                    state: if i % 7 == 3 {
                        crate::domain::ThreadState::default()
                    } else {
                        crate::domain::ThreadState::Closed {
                            phase: crate::domain::Phase::Idle,
                            exit: crate::domain::Exit {
                                kind: crate::domain::ExitKind::Exited,
                                code: Some(0),
                                signal: None,
                                message: None,
                            },
                        }
                    },
                    ..Default::default()
                },
                out: OutputFacts {
                    last_assistant_text: (i % 3 != 0)
                        .then(|| format!("answer {i}: {}", "é ".repeat(i % 300))),
                    ..OutputFacts::default()
                },
                events: vec![],
                usage: Default::default(),
                pending: Default::default(),
                attention: None,
                worktree: None,
            })
            .collect()
    }

    /// A list's threads, handed over in batches of [`BATCH`] as the engine does; counts how
    /// often they were read.
    struct Fake {
        facts: Vec<ThreadFacts>,
        passes: usize,
    }

    impl ListRows for Fake {
        fn count(&mut self) -> Result<(usize, usize)> {
            let live = self.facts.iter().filter(|f| f.row.is_live()).count();
            Ok((self.facts.len(), live))
        }

        fn batches(
            &mut self,
            f: &mut dyn FnMut(Vec<Rendered>, bool) -> Result<bool>,
        ) -> Result<()> {
            self.passes += 1;
            let mut batches: Vec<Vec<Rendered>> = self
                .facts
                .chunks(BATCH)
                .map(|b| b.iter().map(|t| render(t).unwrap()).collect())
                .collect();
            if self.facts.len().is_multiple_of(BATCH) {
                batches.push(Vec::new());
            }
            let n = batches.len();
            for (i, batch) in batches.into_iter().enumerate() {
                if !f(batch, i + 1 == n)? {
                    break;
                }
            }
            Ok(())
        }
    }

    /// The answer serialized whole from the typed structs, as a `Reply::Result` would be.
    fn whole(listed: &[Rendered], wire: Wire) -> Vec<u8> {
        let mut text = String::new();
        if listed.is_empty() {
            text.push_str(format::NO_THREADS);
        }
        let mut shown = 0;
        push_lines(&mut text, listed, &mut shown);
        push_more(&mut text, shown, listed.len());
        let list: Vec<Box<RawValue>> = listed
            .iter()
            .map(|r| RawValue::from_string(r.json.clone()).unwrap())
            .collect();
        let live = listed.iter().filter(|r| r.live).count();
        let result = ToolResult::new(text, Listed::new(&list, listed.len(), live, wire));
        let mut line = b"{\"id\":7,\"result\":".to_vec();
        match wire {
            Wire::Contract => serde_json::to_writer(&mut line, &result).unwrap(),
            Wire::Compact => {
                let mut ascii = super::super::wire::Ascii::new(&mut line);
                serde_json::to_writer(&mut ascii, &result).unwrap();
                ascii.finish().unwrap();
            }
        }
        line.push(b'}');
        line
    }

    /// Whatever the list's length, the streamed answer is the answer serialized whole: the
    /// contract's form byte for byte (the list read twice only when it is longer than a
    /// batch), and the compact form its part lines (each under 128 KiB, ASCII) and a response
    /// line that is the whole answer with the placeholders.
    #[test]
    fn a_streamed_list_is_the_answer_serialized_whole() {
        for n in [0, 1, 16, 17, 200, 201, BATCH, BATCH + 1, 600] {
            let all = facts(n);
            let listed: Vec<Rendered> = all.iter().map(|f| render(f).unwrap()).collect();

            let mut rows = Fake {
                facts: all.clone(),
                passes: 0,
            };
            let mut line = Vec::new();
            write(Wire::Contract, &7.into(), &mut rows, &mut line).unwrap();
            assert!(line == whole(&listed, Wire::Contract), "{n}: contract form");
            assert_eq!(rows.passes, if n > BATCH { 3 } else { 1 }, "{n}");
            let v: Value = serde_json::from_slice(&line).unwrap();
            let text = v["result"]["content"][0]["text"].as_str().unwrap();
            let shown = n.min(format::MAX_LIST_LINES);
            assert_eq!(
                text.lines().count(),
                if n > shown { shown + 1 } else { shown.max(1) },
                "{n}"
            );

            let mut rows = Fake {
                facts: all,
                passes: 0,
            };
            let mut out = Vec::new();
            write(Wire::Compact, &7.into(), &mut rows, &mut out).unwrap();
            assert_eq!(rows.passes, 1, "{n}");
            assert!(out.is_ascii(), "{n}");
            let mut lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
            let response = lines.pop().unwrap();
            assert!(
                response == whole(&listed, Wire::Compact),
                "{n}: compact response"
            );
            let mut parts = Vec::new();
            for l in lines {
                assert!(l.len() < 128 * 1024, "{n}: {}", l.len());
                let v: Value = serde_json::from_slice(l).unwrap();
                assert_eq!(v["id"], 7);
                parts.extend(v["part"].as_array().unwrap().iter().cloned());
            }
            assert_eq!(parts.len(), n);
            for (p, r) in parts.iter().zip(&listed) {
                let mut want: Value = serde_json::from_str(&r.json).unwrap();
                if want.get("resultSummary").is_some() {
                    want["resultSummary"] = 0.into();
                }
                assert_eq!(p, &want, "{n}");
            }
        }
    }
}
