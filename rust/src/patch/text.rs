//! A text file as lines that remember their own ending, so untouched lines (and context lines)
//! come back byte for byte; a UTF-8 BOM is kept aside and put back.

const BOM: &str = "\u{feff}";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub text: &'a str,
    /// "\n", "\r\n", or "" for a last line without a newline.
    pub eol: &'a str,
}

#[derive(Debug)]
pub struct TextFile<'a> {
    pub bom: bool,
    pub lines: Vec<Line<'a>>,
}

impl<'a> TextFile<'a> {
    pub fn parse(content: &'a str) -> Self {
        let (bom, body) = match content.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, content),
        };
        let mut lines = Vec::new();
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', body.as_bytes()) {
            let raw = &body[start..nl];
            let (text, eol) = match raw.strip_suffix('\r') {
                Some(t) => (t, &body[nl - 1..=nl]),
                None => (raw, &body[nl..=nl]),
            };
            lines.push(Line { text, eol });
            start = nl + 1;
        }
        if start < body.len() {
            lines.push(Line {
                text: &body[start..],
                eol: "",
            });
        }
        Self { bom, lines }
    }

    /// New lines take the file's first line ending (what rustfmt and Ruff detect), else LF.
    pub fn default_eol(&self) -> &'a str {
        self.lines
            .first()
            .map(|l| l.eol)
            .filter(|e| !e.is_empty())
            .unwrap_or("\n")
    }

    pub fn texts(&self) -> Vec<&'a str> {
        self.lines.iter().map(|l| l.text).collect()
    }
}

/// Join lines back; a line without an ending gets the default one (an updated file always ends
/// with a newline, as in Codex).
pub fn render(bom: bool, lines: &[Line<'_>], default_eol: &str) -> String {
    let size: usize = lines.iter().map(|l| l.text.len() + 2).sum();
    let mut out = String::with_capacity(size + 3);
    if bom {
        out.push_str(BOM);
    }
    for l in lines {
        out.push_str(l.text);
        out.push_str(if l.eol.is_empty() { default_eol } else { l.eol });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_mixed_endings_and_bom() {
        let src = "\u{feff}a\r\nb\nc\r\n\td";
        let f = TextFile::parse(src);
        assert!(f.bom);
        assert_eq!(f.texts(), vec!["a", "b", "c", "\td"]);
        assert_eq!(f.default_eol(), "\r\n");
        assert_eq!(render(f.bom, &f.lines, f.default_eol()), "\u{feff}a\r\nb\nc\r\n\td\r\n");
        let g = TextFile::parse("x\ny\n");
        assert_eq!(render(g.bom, &g.lines, g.default_eol()), "x\ny\n");
        assert!(TextFile::parse("").lines.is_empty());
        assert_eq!(TextFile::parse("\n\n").texts(), vec!["", ""]);
    }
}
