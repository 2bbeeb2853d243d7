//! The one hex digest helper: journal entries of the file layer, cache and socket names of the
//! search index.

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
