//! The one hex digest helper: journal entries of the file layer, cache and socket names of the
//! search index, the naming plan's hash suffixes.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(bytes, &mut out);
    out
}

/// Lowercase hex of `bytes`, appended to `out` (the naming plan's hash suffixes: no allocation).
pub fn push_hex(bytes: &[u8], out: &mut String) {
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
}
