//! A file's text style, kept when toolroute writes to it: its encoding (UTF-8 with or without
//! BOM, UTF-16/32 by BOM, or other bytes, taken as Latin-1) and its CRLF line endings.

use memchr::memmem;

const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";
/// The byte-order mark as a character (what a UTF-8 BOM decodes to).
pub const BOM_CHAR: char = '\u{feff}';

/// Magic numbers of common binary formats, so a refusal can say what the file is.
const MAGIC: [(&[u8], &str); 9] = [
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive (also .jar/.docx/.xlsx)"),
    (b"\x7fELF", "ELF executable"),
    (b"\x1f\x8b", "gzip archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"SQLite format 3\x00", "SQLite database"),
];

/// Why a file whose first bytes are `head` is not text (`None` if it looks like text): a known
/// binary format, or a NUL byte. UTF-16/32 with a BOM is text.
pub fn binary_kind(head: &[u8]) -> Option<&'static str> {
    if Encoding::by_bom(head).is_some() {
        return None;
    }
    if let Some((_, kind)) = MAGIC.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Some(kind);
    }
    memchr::memchr(0, head).map(|_| "binary data (NUL bytes)")
}

/// A text file's encoding, as its byte-order mark (or its bytes) say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 without a byte-order mark.
    Utf8,
    /// UTF-8 with a byte-order mark.
    Utf8Bom,
    /// UTF-16, little-endian (by its BOM).
    Utf16Le,
    /// UTF-16, big-endian (by its BOM).
    Utf16Be,
    /// UTF-32, little-endian (by its BOM).
    Utf32Le,
    /// UTF-32, big-endian (by its BOM).
    Utf32Be,
    /// Not valid UTF-8 and no BOM: every byte is one character (how read_file shows it).
    Latin1,
}

impl Encoding {
    /// Sniff from a file's bytes (the BOM, then UTF-8 validity).
    pub fn of(bytes: &[u8]) -> Self {
        match Encoding::by_bom(bytes) {
            Some(enc) => enc,
            None if std::str::from_utf8(bytes).is_ok() => Encoding::Utf8,
            None => Encoding::Latin1,
        }
    }

    /// The encoding a file's first bytes name by their byte-order mark, if they have one: the
    /// one place a BOM is recognised.
    pub fn by_bom(head: &[u8]) -> Option<Self> {
        match head {
            [0xff, 0xfe, 0, 0, ..] => Some(Encoding::Utf32Le),
            [0, 0, 0xfe, 0xff, ..] => Some(Encoding::Utf32Be),
            [0xff, 0xfe, ..] => Some(Encoding::Utf16Le),
            [0xfe, 0xff, ..] => Some(Encoding::Utf16Be),
            _ if head.starts_with(UTF8_BOM) => Some(Encoding::Utf8Bom),
            _ => None,
        }
    }

    /// UTF-16 or UTF-32: lines cannot be found in the raw bytes.
    pub fn is_wide(self) -> bool {
        matches!(
            self,
            Encoding::Utf16Le | Encoding::Utf16Be | Encoding::Utf32Le | Encoding::Utf32Be
        )
    }

    /// Python's codec for the bytes after the BOM.
    pub fn codec(self) -> &'static str {
        match self {
            Encoding::Utf8 | Encoding::Utf8Bom => "utf-8",
            Encoding::Utf16Le => "utf-16-le",
            Encoding::Utf16Be => "utf-16-be",
            Encoding::Utf32Le => "utf-32-le",
            Encoding::Utf32Be => "utf-32-be",
            Encoding::Latin1 => "latin-1",
        }
    }

    /// How read_file names a BOM-marked encoding to the model.
    pub fn bom_label(self) -> &'static str {
        match self {
            Encoding::Utf8Bom => "UTF-8 with BOM",
            Encoding::Utf16Le => "UTF-16LE (BOM)",
            Encoding::Utf16Be => "UTF-16BE (BOM)",
            Encoding::Utf32Le => "UTF-32LE (BOM)",
            Encoding::Utf32Be => "UTF-32BE (BOM)",
            Encoding::Utf8 | Encoding::Latin1 => self.name(),
        }
    }

    /// The name messages use, e.g. `"UTF-16LE"`.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "UTF-8",
            Encoding::Utf8Bom => "UTF-8 with BOM",
            Encoding::Utf16Le => "UTF-16LE",
            Encoding::Utf16Be => "UTF-16BE",
            Encoding::Utf32Le => "UTF-32LE",
            Encoding::Utf32Be => "UTF-32BE",
            Encoding::Latin1 => "Latin-1 (not UTF-8)",
        }
    }

    /// The byte-order mark it writes (empty for none).
    pub fn bom(self) -> &'static [u8] {
        match self {
            Encoding::Utf8 | Encoding::Latin1 => b"",
            Encoding::Utf8Bom => UTF8_BOM,
            Encoding::Utf16Le => b"\xff\xfe",
            Encoding::Utf16Be => b"\xfe\xff",
            Encoding::Utf32Le => b"\xff\xfe\0\0",
            Encoding::Utf32Be => b"\0\0\xfe\xff",
        }
    }

    /// The text of `bytes` in this encoding (lossy; only used to look at line endings).
    fn text(self, bytes: &[u8]) -> String {
        let body = &bytes[self.bom().len().min(bytes.len())..];
        let units = |n: usize, be: bool| -> Vec<u32> {
            body.chunks_exact(n)
                .map(|c| {
                    let mut v = 0u32;
                    for i in 0..n {
                        let b = if be { c[i] } else { c[n - 1 - i] };
                        v = (v << 8) | u32::from(b);
                    }
                    v
                })
                .collect()
        };
        match self {
            Encoding::Utf8 | Encoding::Utf8Bom => String::from_utf8_lossy(body).into_owned(),
            Encoding::Latin1 => body.iter().map(|&b| char::from(b)).collect(),
            Encoding::Utf16Le | Encoding::Utf16Be => {
                let u: Vec<u16> = units(2, self == Encoding::Utf16Be)
                    .into_iter()
                    .map(|v| v as u16)
                    .collect();
                String::from_utf16_lossy(&u)
            }
            Encoding::Utf32Le | Encoding::Utf32Be => units(4, self == Encoding::Utf32Be)
                .into_iter()
                .map(|v| char::from_u32(v).unwrap_or('\u{fffd}'))
                .collect(),
        }
    }

    /// Encode `text` (no BOM); `Err` names the first character this encoding cannot hold.
    fn encode(self, text: &str) -> Result<Vec<u8>, char> {
        Ok(match self {
            Encoding::Utf8 | Encoding::Utf8Bom => text.as_bytes().to_vec(),
            Encoding::Latin1 => {
                let mut out = Vec::with_capacity(text.len());
                for c in text.chars() {
                    out.push(u8::try_from(u32::from(c)).map_err(|_| c)?);
                }
                out
            }
            Encoding::Utf16Le => text.encode_utf16().flat_map(u16::to_le_bytes).collect(),
            Encoding::Utf16Be => text.encode_utf16().flat_map(u16::to_be_bytes).collect(),
            Encoding::Utf32Le => text
                .chars()
                .flat_map(|c| u32::from(c).to_le_bytes())
                .collect(),
            Encoding::Utf32Be => text
                .chars()
                .flat_map(|c| u32::from(c).to_be_bytes())
                .collect(),
        })
    }
}

/// CRLF when every newline of `text` is CRLF.
fn all_crlf(text: &[u8]) -> bool {
    let newlines = memchr::memchr_iter(b'\n', text).count();
    newlines > 0 && memmem::find_iter(text, b"\r\n").count() == newlines
}

/// Give new content an existing file's style: its UTF-8 BOM, and CRLF when every newline of
/// the file is CRLF and the content uses bare LF (so a rewrite does not flip the file's endings).
pub fn conform_to_style(existing: &[u8], content: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 16);
    if existing.starts_with(UTF8_BOM) && !content.starts_with(BOM_CHAR) {
        out.extend_from_slice(UTF8_BOM);
    }
    if all_crlf(existing) && !content.contains('\r') {
        out.extend_from_slice(content.replace('\n', "\r\n").as_bytes());
    } else {
        out.extend_from_slice(content.as_bytes());
    }
    out
}

/// Text the file's encoding cannot hold: nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the file is {encoding} and the content has {bad:?} (U+{code:04X}), which {encoding} cannot hold; nothing was written. Use only characters the file's encoding has, or delete the file and create it anew")]
pub struct StyleError {
    /// The encoding's name.
    pub encoding: &'static str,
    /// The first character it cannot hold.
    pub bad: char,
    /// That character's code point.
    pub code: u32,
}

/// `content` encoded the way `existing` is (encoding and CRLF endings). `appending`: the bytes
/// go after the file's own, so no BOM is added.
pub fn encode_like(existing: &[u8], content: &str, appending: bool) -> Result<Vec<u8>, StyleError> {
    let enc = Encoding::of(existing);
    if matches!(enc, Encoding::Utf8 | Encoding::Utf8Bom) {
        let mut out = conform_to_style(existing, content);
        if appending && out.starts_with(UTF8_BOM) && !content.starts_with(BOM_CHAR) {
            out.drain(..UTF8_BOM.len());
        }
        return Ok(out);
    }
    let text = content.strip_prefix('\u{feff}').unwrap_or(content);
    let crlf = all_crlf(enc.text(existing).as_bytes()) && !text.contains('\r');
    let text = if crlf {
        text.replace('\n', "\r\n")
    } else {
        text.to_string()
    };
    let body = enc.encode(&text).map_err(|bad| StyleError {
        encoding: enc.name(),
        bad,
        code: u32::from(bad),
    })?;
    let bom = if appending && !existing.is_empty() {
        b"" as &[u8]
    } else {
        enc.bom()
    };
    Ok([bom, &body].concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_follow_the_file_style() {
        assert_eq!(
            conform_to_style(b"\xef\xbb\xbfa\r\nb\r\n", "x\ny\n"),
            b"\xef\xbb\xbfx\r\ny\r\n"
        );
        assert_eq!(conform_to_style(b"a\r\nb\n", "x\ny\n"), b"x\ny\n");
        assert_eq!(conform_to_style(b"", "x\n"), b"x\n");
        assert_eq!(conform_to_style(b"a\r\n", "x\r\ny\n"), b"x\r\ny\n");
    }

    #[test]
    fn appends_keep_encoding_and_endings() {
        let utf16: Vec<u8> = [
            b"\xff\xfe" as &[u8],
            &"a\r\n"
                .encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect::<Vec<_>>(),
        ]
        .concat();
        let added = encode_like(&utf16, "b\n", true).unwrap();
        assert_eq!(
            added,
            "b\r\n"
                .encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect::<Vec<_>>()
        );
        let whole = encode_like(&utf16, "c\n", false).unwrap();
        assert!(whole.starts_with(b"\xff\xfe"));
        assert_eq!(
            encode_like(b"caf\xe9\n", "\u{e9}t\u{e9}\n", true).unwrap(),
            b"\xe9t\xe9\n"
        );
        assert!(encode_like(b"caf\xe9\n", "\u{20ac}", true).is_err());
        assert_eq!(
            encode_like(b"\xef\xbb\xbfa\n", "b\n", true).unwrap(),
            b"b\n"
        );
    }
}
