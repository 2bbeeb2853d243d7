//! Trigrams of ASCII-case-folded bytes: what the index stores per file and what a query needs.
//! Folding only ASCII keeps a byte a byte, so case-insensitive queries over ASCII letters work
//! and a non-ASCII byte still stands for itself.

use std::io::{self, Read};

pub(crate) fn fold(b: u8) -> u8 {
    b.to_ascii_lowercase()
}

/// The trigram of three folded bytes.
pub(crate) fn key(a: u8, b: u8, c: u8) -> u32 {
    (u32::from(a) << 16) | (u32::from(b) << 8) | u32::from(c)
}

/// The distinct trigrams of an already folded string.
pub(crate) fn of_folded(s: &[u8]) -> Vec<u32> {
    let mut out: Vec<u32> = s.windows(3).map(|w| key(w[0], w[1], w[2])).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// What reading a file told: its trigrams (before the first NUL, where the searcher stops) or
/// nothing usable.
pub(crate) struct FileGrams {
    /// Sorted, distinct.
    pub(crate) grams: Vec<u32>,
    /// A NUL byte: the searcher counts the file as binary when it reaches it.
    pub(crate) has_nul: bool,
    /// A byte order mark: the searcher transcodes (UTF-16) or strips it; the file is always
    /// searched rather than reasoned about.
    pub(crate) unsure: bool,
    /// Bytes read.
    pub(crate) bytes: u64,
}

/// A per-thread scratch set over all 2^24 trigrams (2 MiB), cleared by what was set.
pub(crate) struct Extractor {
    seen: Vec<u64>,
    buf: Vec<u8>,
}

pub(crate) const BOMS: [&[u8]; 3] = [b"\xEF\xBB\xBF", b"\xFF\xFE", b"\xFE\xFF"];

impl Extractor {
    pub(crate) fn new() -> Self {
        Self {
            seen: vec![0; (1 << 24) / 64],
            buf: vec![0; 64 * 1024],
        }
    }

    /// Read `file` up to its first NUL (or its end).
    pub(crate) fn read(&mut self, file: &mut impl Read) -> io::Result<FileGrams> {
        let mut grams = Vec::new();
        let (mut a, mut b) = (0u8, 0u8);
        let mut have = 0usize;
        let mut total = 0u64;
        let mut has_nul = false;
        let mut unsure = false;
        loop {
            let n = match file.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.clear(&grams);
                    return Err(e);
                }
            };
            let mut chunk = &self.buf[..n];
            if total == 0 {
                unsure = BOMS.iter().any(|bom| chunk.starts_with(bom));
            }
            total += n as u64;
            if let Some(i) = memchr::memchr(0, chunk) {
                chunk = &chunk[..i];
                has_nul = true;
            }
            for &byte in chunk {
                let c = fold(byte);
                if have >= 2 {
                    let k = key(a, b, c);
                    let (word, bit) = ((k >> 6) as usize, 1u64 << (k & 63));
                    if self.seen[word] & bit == 0 {
                        self.seen[word] |= bit;
                        grams.push(k);
                    }
                } else {
                    have += 1;
                }
                (a, b) = (b, c);
            }
            if has_nul {
                break;
            }
        }
        self.clear(&grams);
        grams.sort_unstable();
        Ok(FileGrams {
            grams,
            has_nul,
            unsure,
            bytes: total,
        })
    }

    fn clear(&mut self, grams: &[u32]) {
        for &k in grams {
            self.seen[(k >> 6) as usize] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_at_nul_and_folds() {
        let mut x = Extractor::new();
        let g = x.read(&mut &b"AbCd\0xyz"[..]).unwrap();
        assert!(g.has_nul && !g.unsure);
        assert_eq!(g.grams, of_folded(b"abcd"));
        let g = x.read(&mut &b"\xFF\xFEa\0b\0c\0"[..]).unwrap();
        assert!(g.unsure);
        let g = x.read(&mut &b"abcabc"[..]).unwrap();
        assert_eq!(g.grams, of_folded(b"abcabc"));
    }
}
