//! Make hidden and terminal-controlling characters visible in text that reaches a model.
//!
//! Escaped (as `\x1b`, `\u202e`, `\U000e0041`): every Unicode character of category Cc (controls)
//! and Cf (format: bidi overrides and isolates, zero-width space, word joiner, BOM, tag
//! characters, ...), plus the variation selectors supplement, which can hide bytes after any
//! character. Kept: `\n`, `\t`, `\r` right before `\n` (CRLF), and the zero-width joiner and
//! non-joiner, which emoji sequences and several scripts need. Surrogates (category Cs) cannot
//! occur in a Rust string; the Python side escapes them before calling in.
//!
//! The scan takes plain ASCII eight bytes at a time, looks up other bytes one by one and decodes
//! only the non-ASCII characters that may be unsafe, so clean text costs about one pass over
//! memory and is not copied.

/// The one wording for output cut at the character cap (its end): exported as
/// `_core.CUT_NOTICE`, which `toolroute.outputcap` applies to every built-in's text and the
/// search renderer to its pages. (A cut out of the middle, with counts, is `textsafety.py`'s
/// `cut_notice`.)
pub const CUT_NOTICE: &str = " … [output cut at the size limit]";

/// Non-ASCII code points to escape (inclusive ranges, sorted); Unicode 14 to 16.
const UNSAFE_RANGES: &[(u32, u32)] = &[
    (0x80, 0x9F),
    (0xAD, 0xAD),
    (0x600, 0x605),
    (0x61C, 0x61C),
    (0x6DD, 0x6DD),
    (0x70F, 0x70F),
    (0x890, 0x891),
    (0x8E2, 0x8E2),
    (0x180E, 0x180E),
    (0x200B, 0x200B),
    (0x200E, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
    (0xE0100, 0xE01EF),
];

fn unsafe_ascii(b: u8, next: Option<u8>) -> bool {
    match b {
        b'\n' | b'\t' => false,
        b'\r' => next != Some(b'\n'),
        0x00..=0x1F | 0x7F => true,
        _ => false,
    }
}

fn unsafe_wide(c: char) -> bool {
    let cp = c as u32;
    UNSAFE_RANGES
        .binary_search_by(|&(lo, hi)| {
            if hi < cp {
                std::cmp::Ordering::Less
            } else if lo > cp {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

fn push_escape(out: &mut String, c: char) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let cp = c as u32;
    let (tag, digits) = match cp {
        0..=0xFF => ('x', 2),
        0x100..=0xFFFF => ('u', 4),
        _ => ('U', 8),
    };
    out.push('\\');
    out.push(tag);
    for shift in (0..digits).rev() {
        out.push(HEX[((cp >> (4 * shift)) & 0xF) as usize] as char);
    }
}

/// Bytes that may start a character to escape: ASCII controls but `\n` and `\t`, DEL, and the
/// UTF-8 lead bytes of the ranges above (C2: C1 controls and U+00AD; D8 DB DC E0: Arabic and Syriac
/// format marks; E1: U+180E; E2: U+200B-U+206F; EF: U+FEFF and U+FFF9-U+FFFB; F0 F3: the
/// supplementary planes). Any other byte is a safe character or inside one, so the scan is a
/// table lookup per byte.
const fn check_table() -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b != b'\n' as usize && b != b'\t' as usize;
        b += 1;
    }
    table[0x7F] = true;
    let leads = [0xC2, 0xD8, 0xDB, 0xDC, 0xE0, 0xE1, 0xE2, 0xEF, 0xF0, 0xF3];
    let mut i = 0;
    while i < leads.len() {
        table[leads[i]] = true;
        i += 1;
    }
    table
}

const CHECK: [bool; 256] = check_table();

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;
/// Bytes looked at one by one after a word that is not all plain ASCII (text that is not ASCII
/// goes on so: a word test for every eight bytes would cost it more than it saves).
const BYTEWISE: usize = 32;

/// The high bit of each byte of `word` that is zero (exact per byte: no borrow runs between them).
#[inline]
fn zero_bytes(word: u64) -> u64 {
    !(((word & !HI).wrapping_add(!HI)) | word | !HI)
}

/// Whether all eight bytes of `word` are printable ASCII (0x20-0x7E), `\n` or `\t`: none of them
/// needs a look (`CHECK` marks the other controls, DEL and lead bytes, all outside those).
#[inline]
fn plain_ascii(word: u64) -> bool {
    // Below 0x20: adding 0x60 to the low seven bits leaves the high bit clear (no carry out).
    let control = !((word & !HI).wrapping_add(0x60 * LO)) & HI;
    let kept = zero_bytes(word ^ (b'\n' as u64 * LO)) | zero_bytes(word ^ (b'\t' as u64 * LO));
    let del = zero_bytes(word ^ (0x7F * LO));
    (word | (control & !kept) | del) & HI == 0
}

/// The byte offset of the first character to escape, if any. Plain ASCII (printable, newlines,
/// tabs) is skipped eight bytes at a time (a large result is mostly that); after any other word
/// the next `BYTEWISE` bytes are looked up one by one in `CHECK`.
fn first_unsafe(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if let Some(&word) = bytes
            .get(i..i + 8)
            .and_then(|w| <&[u8; 8]>::try_from(w).ok())
        {
            if plain_ascii(u64::from_le_bytes(word)) {
                i += 8;
                continue;
            }
        }
        let end = bytes.len().min(i + BYTEWISE);
        for (k, &b) in bytes[i..end].iter().enumerate() {
            if CHECK[b as usize] && unsafe_at(text, i + k, b) {
                return Some(i + k);
            }
        }
        i = end;
    }
    None
}

/// Whether the character starting at byte `i` of `text` (its first byte `b`, one `CHECK` marks)
/// is to be escaped.
fn unsafe_at(text: &str, i: usize, b: u8) -> bool {
    if b < 0x80 {
        unsafe_ascii(b, text.as_bytes().get(i + 1).copied())
    } else {
        // A lead byte is always on a char boundary (continuation bytes are 0x80-0xBF).
        text[i..].chars().next().is_some_and(unsafe_wide)
    }
}

/// `first_unsafe` as one byte-wise scan (the reference its word skipping is tested against).
#[cfg(test)]
fn first_unsafe_bytewise(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    (0..bytes.len()).find(|&i| CHECK[bytes[i] as usize] && unsafe_at(text, i, bytes[i]))
}

/// `text` with every unsafe character escaped, or `None` when there is nothing to change.
/// Safe spans are copied whole; only the characters to escape are looked at one by one.
pub fn neutralize(text: &str) -> Option<String> {
    let mut pos = first_unsafe(text)?;
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..pos]);
    loop {
        let c = text[pos..].chars().next().unwrap_or('\0');
        push_escape(&mut out, c);
        pos += c.len_utf8();
        match first_unsafe(&text[pos..]) {
            Some(offset) => {
                out.push_str(&text[pos..pos + offset]);
                pos += offset;
            }
            None => {
                out.push_str(&text[pos..]);
                return Some(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_untouched() {
        for text in [
            "",
            "hello\nworld\t!",
            "a\r\nb",
            "日本語 😀 👨\u{200d}👩",
            "x\u{200c}y",
        ] {
            assert_eq!(neutralize(text), None, "{text:?}");
        }
    }

    #[test]
    fn controls_become_visible() {
        assert_eq!(
            neutralize("a\x1b[31mb\u{202e}c\rd\u{9b}\u{e0041}").as_deref(),
            Some("a\\x1b[31mb\\u202ec\\x0dd\\x9b\\U000e0041")
        );
        assert_eq!(neutralize("\r").as_deref(), Some("\\x0d"));
        assert_eq!(neutralize("ok\r\n\r").as_deref(), Some("ok\r\n\\x0d"));
    }

    #[test]
    fn word_skipping_finds_what_the_byte_scan_finds() {
        let base = "0123456789abcdefghij klmnopqrstuvwxyz~!";
        let inserts = [
            "\x1b",
            "\x7f",
            "\r",
            "\u{202e}",
            "\u{9b}",
            "\u{e0041}",
            "\n",
            "\t",
            "\r\n",
            "\u{e9}",
            "\u{200d}",
        ];
        for at in 0..=base.len() {
            for insert in inserts {
                let text = format!("{}{}{}", &base[..at], insert, &base[at..]);
                let whole = first_unsafe_bytewise(&text);
                assert_eq!(first_unsafe(&text), whole, "{text:?}");
                assert_eq!(whole.is_some(), neutralize(&text).is_some(), "{text:?}");
            }
        }
        for byte in 0u8..=255 {
            for at in 0..8 {
                let mut bytes = *b"abc\ndef\t";
                bytes[at] = byte;
                let plain = (0x20..=0x7E).contains(&byte) || byte == b'\n' || byte == b'\t';
                assert_eq!(
                    plain_ascii(u64::from_le_bytes(bytes)),
                    plain,
                    "{byte:#x} at {at}"
                );
            }
        }
    }

    #[test]
    fn every_unsafe_char_starts_with_a_checked_byte() {
        let mut buf = [0u8; 4];
        for &(lo, hi) in UNSAFE_RANGES {
            for cp in lo..=hi {
                let c = char::from_u32(cp).expect("no surrogates in the table");
                assert!(
                    CHECK[c.encode_utf8(&mut buf).as_bytes()[0] as usize],
                    "{cp:#x}"
                );
            }
        }
    }

    #[test]
    fn ranges_are_sorted_and_disjoint() {
        for pair in UNSAFE_RANGES.windows(2) {
            assert!(pair[0].0 <= pair[0].1 && pair[0].1 < pair[1].0);
        }
    }
}
