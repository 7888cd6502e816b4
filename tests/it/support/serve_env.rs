//! The environment variables `threadbase serve` reads that a serve started by a test or a bench
//! must not inherit from whoever runs them (`benches/serve.rs` includes this file too).

pub const INHERITED: [&str; 13] = [
    "THREADBASE_DB",
    "PI_THREADS_PATH",
    "PI_THREADS_DEPTH",
    "PI_THREADS_SELF_ID",
    "PI_THREADS_PARENT_PATH",
    "PI_THREADS_PARENT_ID",
    "PI_THREADS_ROOT_SESSION_ID",
    "PI_THREADS_MAX_DEPTH",
    "PI_THREADS_MAX_THREADS",
    "PI_THREADS_IDLE_CLEANUP_MS",
    "PI_THREADS_LIVE_TIMEOUT_MS",
    "THREADBASE_LOG",
    "THREADBASE_LOG_FILE",
];
