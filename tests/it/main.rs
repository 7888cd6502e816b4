//! Every integration test, in one binary (one link instead of one per file). Each file is a
//! module named for what it covers; `support` holds the helpers they share. The three contracts'
//! tests through serve mirror their verbs: `thread/<verb>.rs` (contract A's actions),
//! `agent/<verb>.rs` (contract B, `agent_*`) and `worker/<verb>.rs` (contract C, `threads_*`),
//! each folder's shared helpers in its `mod.rs`. Run one module's tests with
//! `cargo test --test it <module>::` (for example `thread::` or `thread::wait::`).

mod support;

mod adopt;
mod agent;
mod attention;
mod bad_env;
mod budgets;
mod check;
mod cli;
mod cli_sessions;
mod cli_stop;
mod cli_tree;
mod concurrency;
mod crash_restore;
mod crash_serve;
mod demo;
mod extension;
mod fuzz_corpus;
mod fuzz_serve;
mod hosts;
mod hosts_netns;
mod http;
mod layers;
mod logging;
mod many_writers;
mod old_databases;
mod postgres;
mod prop_paths;
mod prop_ranges;
mod prop_refs;
mod prop_subtree;
mod prop_usage;
mod query_plans;
mod questions;
mod queue;
mod races;
mod readme;
mod readme_sql;
mod real_pi_adopt;
mod real_pi_agent;
mod real_pi_agent_019;
mod real_pi_attention;
mod real_pi_extension;
mod real_pi_install;
mod real_pi_notices;
mod real_pi_phases;
mod real_pi_questions;
mod real_pi_queue;
mod real_pi_resume_fork;
mod real_pi_runtime;
mod real_pi_serve;
mod real_pi_smoke;
mod real_pi_status_tmux;
mod real_pi_subtree;
mod real_pi_threads_command;
mod real_pi_usage;
mod real_pi_worker;
mod real_pi_worktrees;
mod record_pi_events;
mod runtime_process;
mod runtime_scripted;
mod scripted_agent;
mod serve_notices;
mod serve_subtree;
mod session_files;
mod spend;
mod status_line;
mod store;
mod thread;
mod thread_caps;
mod top_tmux;
mod usage_cli;
mod usage_restore;
mod web;
mod web_page;
mod worker;
mod worktrees;
