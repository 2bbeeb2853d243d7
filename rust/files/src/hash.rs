//! The digest of a file's content, below the readers that take it (`fs`) and the guard that
//! compares it (`session`).

/// The BLAKE3 hash of a file's bytes (a cryptographic hash, so a change cannot hide behind a
/// collision; BLAKE3 for speed: the guard hashes the file before and after every rewrite).
pub type ContentDigest = [u8; 32];

/// The digest of the concatenation of `parts`.
pub fn digest_parts(parts: &[&[u8]]) -> ContentDigest {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}
