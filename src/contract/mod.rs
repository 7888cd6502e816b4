//! Contract request parsing and result shaping.
//!
//! Validators turn request JSON into typed requests (enums where the contract lists values);
//! results are `Serialize` structs in each contract's key order, borrowed from row data and
//! written straight into the response line.

pub mod agent;
pub mod agent_settings;
pub mod answer;
pub mod args;
pub mod detail;
pub mod events;
pub mod fields;
pub mod format;
pub mod list_answer;
pub mod naming;
pub mod projection;
pub mod request;
pub mod status;
pub mod thread;
pub mod wire;
pub mod worker;

pub use request::Request;
use serde::Serialize;
pub use wire::Wire;

/// What the restore pass writes for a thread whose owner died: contract A's stale exit
/// message and contract B's paused status.
pub const RESTORE_TEXTS: crate::runtime::restore::RestoreTexts =
    crate::runtime::restore::RestoreTexts {
        stale_message: thread::STALE_MESSAGE,
        paused_status: agent::PAUSED_STATUS,
    };

/// A tool result as every contract's tools answer: `{content: [{type: "text", text}],
/// details}`, plus `terminate: true` when the tool ends the caller's run (`agent_pause`).
#[derive(Debug, Serialize)]
pub struct ToolResult<T, D> {
    pub content: [TextContent<T>; 1],
    pub details: D,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub terminate: bool,
}

impl<T: Serialize, D: Serialize> ToolResult<T, D> {
    pub fn new(text: T, details: D) -> Self {
        ToolResult {
            content: [TextContent { kind: "text", text }],
            details,
            terminate: false,
        }
    }
}

/// `{type: "text", text}`.
#[derive(Debug, Serialize)]
pub struct TextContent<T> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub text: T,
}
