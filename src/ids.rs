//! Random identifiers from the kernel's CSPRNG.

use std::io::Read;

/// `n` random lowercase hex digits.
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n.div_ceil(2)];
    let filled = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if filled.is_err() {
        // Fall back to time and address entropy; ids only need to be unlikely to collide and
        // the UNIQUE constraints catch the rest.
        let mut x = crate::time::now_ms() as u64 ^ (bytes.as_ptr() as u64).rotate_left(17);
        for b in bytes.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
    let mut s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    s.truncate(n);
    s
}

/// A contract A thread id: `thread_` + 12 hex digits.
pub fn new_thread_id() -> String {
    format!("thread_{}", random_hex(12))
}
