//! What a verb answers: the result's JSON, or a function that writes a long one as it is
//! produced. The transport (`serve/output.rs`) writes it; the engine only makes it, so the
//! arrow runs from serve down to the engine.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// One request's result. The engine makes it from typed values; the transport
/// (`serve/output.rs`) serializes it, once, straight into the response line it writes.
pub enum Reply {
    /// A result that the function serializes into the writer it is given: the value of the
    /// response line's `result`. It owns what it shapes (rows, snapshots, texts), so the shape
    /// is built and serialized at the edge, in one pass.
    Result(ResultFn),
    /// A result written as it is produced, on the request's worker: the function writes the
    /// whole response line, `{"id": <id>, "result": …}` (and any lines before it), into the
    /// writer, and moves the worker's other tasks away itself (`block_in_place`) before it
    /// may wait on the writer. A reply that was never handed over whole goes as one line (see
    /// [`LineSink`]).
    Stream(StreamFn),
}

/// Serializes a result's value into the writer it is given.
pub type ResultFn = Box<dyn FnOnce(&mut dyn Write) -> Result<()> + Send>;

/// Writes a streamed response line for the request id it is given.
pub type StreamFn = Box<dyn FnOnce(&Value, &mut dyn Write) -> Result<()> + Send>;

impl Reply {
    /// A result that is one typed value it owns.
    pub fn of<T: Serialize + Send + 'static>(result: T) -> Reply {
        Reply::Result(Box::new(move |w| json(w, &result)))
    }

    /// A result shaped, at the edge, from what the function owns (a shape that borrows rows
    /// or texts): the function serializes it with [`json`].
    pub fn shaped(write: impl FnOnce(&mut dyn Write) -> Result<()> + Send + 'static) -> Reply {
        Reply::Result(Box::new(write))
    }

    /// The result as a value, for in-process callers (`threadbase demo`).
    pub fn into_value(self) -> Result<Value> {
        match self {
            Reply::Result(write) => {
                let mut bytes = Vec::new();
                write(&mut bytes)?;
                Ok(serde_json::from_slice(&bytes)?)
            }
            Reply::Stream(write) => {
                let mut line = Vec::new();
                write(&Value::Null, &mut line)?;
                let mut response: Value = serde_json::from_slice(&line).map_err(|_| {
                    Error::internal(
                        "a streamed reply with lines before its response (a compact list's part lines) is for serve's pipe; in-process callers use the contract wire",
                    )
                })?;
                Ok(response["result"].take())
            }
        }
    }
}

/// Serializes `value` into `w` (a typed shape: only a writer's failure makes it fail).
pub fn json(w: &mut dyn Write, value: &impl Serialize) -> Result<()> {
    Ok(serde_json::to_writer(w, value)?)
}

/// A response line's shape: `{"id": …, "result": …}`.
#[derive(Serialize)]
pub struct Response<'a, R> {
    pub id: &'a Value,
    pub result: R,
}
