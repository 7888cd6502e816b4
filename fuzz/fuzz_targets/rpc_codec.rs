//! cargo fuzz target: the body is `threadbase::fuzzing::rpc_codec`, which `tests/it/fuzz_corpus.rs`
//! also replays on stable over `fuzz/corpus/rpc_codec/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| threadbase::fuzzing::rpc_codec(data));
