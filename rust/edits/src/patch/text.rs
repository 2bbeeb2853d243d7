//! A text file as lines that remember their own ending, so untouched lines (and context lines)
//! come back byte for byte; a UTF-8 BOM is kept aside and put back. Untouched runs of lines are
//! copied as whole byte ranges, which keeps big files cheap.

use toolroute_files::BOM_CHAR;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub text: &'a str,
    /// "\n", "\r\n", or "" for a last line without a newline.
    pub eol: &'a str,
}

#[derive(Debug)]
pub struct TextFile<'a> {
    pub bom: bool,
    body: &'a str,
    /// Line texts without their endings, for matching.
    pub texts: Vec<&'a str>,
    /// Byte offset where each line starts, plus one final entry: `body.len()`.
    starts: Vec<usize>,
}

/// A run of original lines `[start, start + old_len)` replaced by `new`.
pub struct Replacement<'a> {
    pub start: usize,
    pub old_len: usize,
    pub new: Vec<Line<'a>>,
}

impl<'a> TextFile<'a> {
    pub fn parse(content: &'a str) -> Self {
        let (bom, body) = match content.strip_prefix(BOM_CHAR) {
            Some(rest) => (true, rest),
            None => (false, content),
        };
        let mut texts = Vec::with_capacity(body.len() / 32 + 1);
        let mut starts = Vec::with_capacity(body.len() / 32 + 2);
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', body.as_bytes()) {
            let raw = &body[start..nl];
            texts.push(raw.strip_suffix('\r').unwrap_or(raw));
            starts.push(start);
            start = nl + 1;
        }
        if start < body.len() {
            texts.push(&body[start..]);
            starts.push(start);
        }
        starts.push(body.len());
        Self {
            bom,
            body,
            texts,
            starts,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    pub fn line(&self, i: usize) -> Line<'a> {
        let text = self.texts[i];
        let body = self.body;
        Line {
            text,
            eol: &body[self.starts[i] + text.len()..self.starts[i + 1]],
        }
    }

    /// New lines take the file's first line ending (what rustfmt and Ruff detect), else LF.
    pub fn default_eol(&self) -> &'a str {
        if self.is_empty() {
            return "\n";
        }
        match self.line(0).eol {
            "" => "\n",
            eol => eol,
        }
    }

    /// The file with `replacements` (sorted, not overlapping) applied. A line left without an
    /// ending gets the default one: an updated file always ends with a newline, as in Codex.
    pub fn render(&self, replacements: &[Replacement<'_>]) -> String {
        let eol = self.default_eol();
        let extra: usize = replacements
            .iter()
            .flat_map(|r| &r.new)
            .map(|l| l.text.len() + 2)
            .sum();
        let mut out = String::with_capacity(self.body.len() + extra + 8);
        if self.bom {
            out.push(BOM_CHAR);
        }
        let head = out.len();
        let end_line = |out: &mut String| {
            if out.len() > head && !out.ends_with('\n') {
                out.push_str(eol);
            }
        };
        let mut cursor = 0;
        for r in replacements {
            out.push_str(&self.body[self.starts[cursor]..self.starts[r.start]]);
            for l in &r.new {
                end_line(&mut out);
                out.push_str(l.text);
                out.push_str(if l.eol.is_empty() { eol } else { l.eol });
            }
            cursor = r.start + r.old_len;
        }
        out.push_str(&self.body[self.starts[cursor]..]);
        end_line(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_mixed_endings_and_bom() {
        let src = "\u{feff}a\r\nb\nc\r\n\td";
        let f = TextFile::parse(src);
        assert!(f.bom);
        assert_eq!(f.texts, vec!["a", "b", "c", "\td"]);
        assert_eq!(
            f.line(1),
            Line {
                text: "b",
                eol: "\n"
            }
        );
        assert_eq!(
            f.line(3),
            Line {
                text: "\td",
                eol: ""
            }
        );
        assert_eq!(f.default_eol(), "\r\n");
        assert_eq!(f.render(&[]), "\u{feff}a\r\nb\nc\r\n\td\r\n");
        let g = TextFile::parse("x\ny\n");
        assert_eq!(g.render(&[]), "x\ny\n");
        assert!(TextFile::parse("").is_empty());
        assert_eq!(TextFile::parse("").render(&[]), "");
        assert_eq!(TextFile::parse("\n\n").texts, vec!["", ""]);
    }

    #[test]
    fn replacements_copy_untouched_ranges() {
        let f = TextFile::parse("a\r\nb\nc");
        let new = vec![Line { text: "B", eol: "" }];
        let r = [Replacement {
            start: 1,
            old_len: 1,
            new,
        }];
        assert_eq!(f.render(&r), "a\r\nB\r\nc\r\n");
        // Appending after a last line that had no newline must not join the lines.
        let add = vec![Line {
            text: "d",
            eol: "\n",
        }];
        let r = [Replacement {
            start: 3,
            old_len: 0,
            new: add,
        }];
        assert_eq!(f.render(&r), "a\r\nb\nc\r\nd\n");
    }
}
