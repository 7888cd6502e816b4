//! What threadbase knows of Pi 1.6 itself, in one place, so that a new Pi version is one
//! module's change: its command line ([`flags`]: the flag table and a child's argv), the
//! events it writes on stdout ([`events`]), its session files ([`session`]), and a stand-in
//! that speaks its RPC protocol from a script ([`scripted_agent`]).
//!
//! A bottom layer: the runtime, the store and the contracts use it; it uses nothing of theirs.

pub mod events;
pub mod flags;
pub mod models;
pub mod scripted_agent;
pub mod session;
