//! How much of a thread a snapshot shows (`detail`), and the limits of each level: what both
//! the projection and its recent events read.

use serde::Serialize;

/// Result text limit at `summary`.
pub const SUMMARY_RESULT_CHARS: usize = 700;
/// Result text limit at `tail`.
pub const TAIL_RESULT_CHARS: usize = 1_200;
/// Events shown at `summary`.
pub const SUMMARY_EVENTS: usize = 5;
/// Events shown at `tail`.
pub const TAIL_EVENTS: usize = 12;
/// `assistant_message.text` limit at `summary` (after compaction).
pub const SUMMARY_EVENT_TEXT_CHARS: usize = 180;
/// `assistant_message.text` limit at `tail`.
pub const TAIL_EVENT_TEXT_CHARS: usize = 700;
/// Output and stderr tails at `tail`.
pub const TAIL_OUTPUT_CHARS: usize = 4_000;

/// How much of a thread a snapshot shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Detail {
    #[default]
    Summary,
    Tail,
    Full,
}

impl Detail {
    pub fn as_str(self) -> &'static str {
        match self {
            Detail::Summary => "summary",
            Detail::Tail => "tail",
            Detail::Full => "full",
        }
    }

    /// The contract's spelling (`summary`, `tail`, `full`), exactly.
    pub fn parse(s: &str) -> Option<Detail> {
        match s {
            "summary" => Some(Detail::Summary),
            "tail" => Some(Detail::Tail),
            "full" => Some(Detail::Full),
            _ => None,
        }
    }
}
