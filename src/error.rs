//! One error type for the whole engine. Every variant has a stable code (the wire `code` of
//! `serve` errors) and a message that says what was wrong and, after `Repair:`, how to fix it.

use std::fmt;

/// Stable error codes, as pinned in DESIGN.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidParams,
    UnknownReference,
    AmbiguousReference,
    Conflict,
    Limit,
    Forbidden,
    Closed,
    NotResumable,
    Io,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidParams => "invalid_params",
            ErrorCode::UnknownReference => "unknown_reference",
            ErrorCode::AmbiguousReference => "ambiguous_reference",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Limit => "limit",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::Closed => "closed",
            ErrorCode::NotResumable => "not_resumable",
            ErrorCode::Io => "io",
            ErrorCode::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The engine's error: a stable code plus a human message (which carries its `Repair:` hint).
/// Serialized as `{code, message}` where it crosses processes in a row (`commands.result`).
///
/// It keeps what caused it (the `io::Error`, the database's error, or a Ctrl-C), so callers
/// tell kinds apart from the cause, never from the message's text, and `source()` reaches it.
/// Two errors are equal when their code and message are: the cause does not cross processes.
#[derive(Debug, Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{message}")]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    #[serde(skip)]
    #[source]
    cause: Option<Cause>,
    /// The message already names the database file (see `store::name_database`).
    #[serde(skip)]
    names_database: bool,
}

/// What an [`Error`] came from, where that matters to a caller or to `source()`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Cause {
    #[error(transparent)]
    Io(std::sync::Arc<std::io::Error>),
    /// The database's own error (kept by `store`, the one place that knows the backend).
    #[error(transparent)]
    Database(std::sync::Arc<dyn std::error::Error + Send + Sync>),
    /// A statement stopped by Ctrl-C (the command line's `sql`).
    #[error("interrupted by Ctrl-C")]
    CtrlC,
}

impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.message == other.message
    }
}

impl Eq for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            cause: None,
            names_database: false,
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidParams, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }
    pub fn io(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Io, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The same error, recording what caused it.
    pub fn caused_by(mut self, cause: Cause) -> Self {
        self.cause = Some(cause);
        self
    }

    /// What caused it, if known.
    pub fn cause(&self) -> Option<&Cause> {
        self.cause.as_ref()
    }

    /// The same error with another text (adding context); the code and the cause stay.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// The same error, with another code (the cause stays).
    pub fn with_code(mut self, code: ErrorCode) -> Self {
        self.code = code;
        self
    }

    /// Marks the message as one that names the database file.
    pub fn naming_database(mut self) -> Self {
        self.names_database = true;
        self
    }

    /// The message names the database file.
    pub fn names_database(&self) -> bool {
        self.names_database
    }

    /// Caused by a closed output (a reader such as `head` that stopped reading).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(&self.cause, Some(Cause::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }

    /// Caused by Ctrl-C.
    pub fn is_ctrl_c(&self) -> bool {
        matches!(self.cause, Some(Cause::CtrlC))
    }
}

/// The start of the message of an error caused by a closed output (a reader such as `head`
/// that stopped reading); the CLI exits quietly on it (`Error::is_broken_pipe`), as
/// command-line tools do.
pub const BROKEN_PIPE: &str = "The output was closed before everything was written";

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        let error = if e.kind() == std::io::ErrorKind::BrokenPipe {
            Error::io(format!(
                "{BROKEN_PIPE} ({e}). Repair: nothing to do when piping into a command such as head; otherwise keep the reading end open."
            ))
        } else {
            Error::io(format!(
                "I/O error: {e}. Repair: check that the path exists and is writable."
            ))
        };
        error.caused_by(Cause::Io(std::sync::Arc::new(e)))
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::invalid(format!(
            "Invalid JSON: {e}. Repair: send one well-formed JSON object."
        ))
    }
}
