//! What a verb answers: the result's JSON, or a function that writes a long one as it is
//! produced. The transport (`serve/output.rs`) writes it; the engine only makes it, so the
//! arrow runs from serve down to the engine.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// One request's result, ready to be written as `{"id": …, "result": …}`.
pub enum Reply {
    /// The result's JSON text.
    Json(Vec<u8>),
    /// A result written as it is produced, on the request's worker: the function writes the
    /// whole response line, `{"id": <id>, "result": …}` (and any lines before it), into the
    /// writer, and moves the worker's other tasks away itself (`block_in_place`) before it
    /// may wait on the writer. A reply that was never handed over whole goes as one line (see
    /// [`LineSink`]).
    Stream(StreamFn),
}

/// Writes a streamed response line for the request id it is given.
pub type StreamFn = Box<dyn FnOnce(&Value, &mut dyn Write) -> Result<()> + Send>;

impl Reply {
    /// The JSON text of `result` (a typed shape; serializing it cannot fail).
    pub fn json(result: &impl Serialize) -> Result<Reply> {
        // Room for a single-thread result, so the buffer rarely grows (a poll is about 6 KB).
        let mut json = Vec::with_capacity(8 * 1024);
        serde_json::to_writer(&mut json, result)?;
        Ok(Reply::Json(json))
    }

    /// The result as a value, for in-process callers (`threadbase demo`).
    pub fn into_value(self) -> Result<Value> {
        match self {
            Reply::Json(bytes) => Ok(serde_json::from_slice(&bytes)?),
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

/// A response line's shape: `{"id": …, "result": …}`.
#[derive(Serialize)]
pub struct Response<'a, R> {
    pub id: &'a Value,
    pub result: R,
}
