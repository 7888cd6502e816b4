//! Contract request parsing and result shaping.

pub mod agent;
pub mod args;
pub mod fields;
pub mod naming;
pub mod projection;
pub mod thread;
pub mod worker;
