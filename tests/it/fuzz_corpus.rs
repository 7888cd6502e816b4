//! Stable replay of the `cargo fuzz` corpus: every file under `fuzz/corpus/<target>/` goes
//! through the same `threadbase::fuzzing::<target>` function the nightly fuzz target calls,
//! plus a few inputs too large for a committed corpus and a proptest of random and mutated
//! bytes (`PROPTEST_CASES` changes its case count).

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use threadbase::fuzzing;
use threadbase::runtime::rpc::MAX_LINE_BYTES;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 3] = [
    ("rpc_codec", fuzzing::rpc_codec),
    ("paths", fuzzing::paths),
    ("session_file", fuzzing::session_file),
];

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

#[test]
fn every_corpus_file_replays_cleanly() {
    for (name, target) in TARGETS {
        let files = corpus(name);
        assert!(files.len() >= 10, "{name}: seed corpus too small");
        for (path, bytes) in &files {
            let run = std::panic::catch_unwind(|| target(bytes));
            assert!(run.is_ok(), "{name}: {} fails", path.display());
        }
        println!("{name}: {} corpus files replayed", files.len());
    }
}

#[test]
fn over_cap_lines_are_counted_not_kept() {
    let mut data = vec![255u8];
    data.extend_from_slice(b"{\"type\":\"turn_start\"}\n");
    data.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 1));
    data.extend_from_slice(b"\r\n");
    data.extend(std::iter::repeat_n(b'y', MAX_LINE_BYTES));
    data.extend_from_slice(b"\n{\"a\":1}");
    fuzzing::rpc_codec(&data);
    // A cap-sized line without LF at EOF, read in 1-byte chunks.
    let mut data = vec![0u8];
    data.extend(std::iter::repeat_n(b'z', MAX_LINE_BYTES + 3));
    fuzzing::rpc_codec(&data);
}

/// Random bytes, and corpus files with random bytes spliced in.
fn input(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let mutated = (
        proptest::sample::select(seeds),
        any::<prop::sample::Index>(),
        proptest::collection::vec(any::<u8>(), 0..16),
    )
        .prop_map(|(mut seed, at, bytes)| {
            let at = at.index(seed.len() + 1);
            seed.splice(at..at, bytes);
            seed
        });
    prop_oneof![proptest::collection::vec(any::<u8>(), 0..256), mutated]
}

proptest! {
    #[test]
    fn rpc_codec_on_random_bytes(data in input(corpus("rpc_codec").into_iter().map(|f| f.1).collect())) {
        fuzzing::rpc_codec(&data);
    }

    #[test]
    fn paths_on_random_bytes(data in input(corpus("paths").into_iter().map(|f| f.1).collect())) {
        fuzzing::paths(&data);
    }

    #[test]
    fn paths_on_grammar_shaped_text(
        segs in proptest::collection::vec("[a-zA-Z0-9_.%-]{0,4}", 0..5),
        abs in any::<bool>(),
        caller in prop_oneof![Just("/root".to_string()), Just("/k".to_string()), "/root/[a-z]{1,3}"],
    ) {
        let value = format!("{}{}", if abs { "/" } else { "" }, segs.join("/"));
        fuzzing::paths(format!("{value}\0{caller}").as_bytes());
    }

    #[test]
    fn session_file_on_random_bytes(data in input(corpus("session_file").into_iter().map(|f| f.1).collect())) {
        fuzzing::session_file(&data);
    }
}
