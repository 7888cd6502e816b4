//! Random identifiers from the operating system's CSPRNG (`getrandom`).

use crate::domain::ThreadId;

/// `n` random lowercase hex digits.
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n.div_ceil(2)];
    fill(&mut bytes);
    let mut s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    s.truncate(n);
    s
}

/// Fills `bytes` from the OS random source. Ids and the HTTP token must never be guessable, so
/// a failing source (no `getrandom(2)` and no readable `/dev/urandom`) is a fatal fault of the
/// machine, not something to paper over with a weaker generator.
pub fn fill(bytes: &mut [u8]) {
    if let Err(e) = getrandom::fill(bytes) {
        panic!("the operating system's random source failed ({e}); threadbase cannot make ids without it");
    }
}

/// A contract A thread id: `thread_` + 12 hex digits.
pub fn new_thread_id() -> ThreadId {
    ThreadId::new(format!("thread_{}", random_hex(12)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_have_their_shapes() {
        for n in [0, 1, 8, 12, 31, 32] {
            let h = super::random_hex(n);
            assert_eq!(h.len(), n);
            assert!(h
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        }
        let id = super::new_thread_id().into_string();
        assert_eq!(id.len(), "thread_".len() + 12, "{id}");
        assert!(id.starts_with("thread_"));
        assert_ne!(super::new_thread_id(), super::new_thread_id());
    }
}
