//! cargo fuzz target: the body is `threadbase::fuzzing::session_file`, which `tests/it/fuzz_corpus.rs`
//! also replays on stable over `fuzz/corpus/session_file/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| threadbase::fuzzing::session_file(data));
