//! cargo fuzz target: the body is `threadbase::fuzzing::paths`, which `tests/it/fuzz_corpus.rs`
//! also replays on stable over `fuzz/corpus/paths/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| threadbase::fuzzing::paths(data));
