//! Locating a chunk's lines in a file: Codex's four tiers, each tried over the whole range before
//! the next, first match wins. Tier 4 maps the punctuation models tend to "prettify" to ASCII.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Exact,
    TrailingWhitespace,
    Whitespace,
    Unicode,
}

impl Tier {
    pub fn describe(self) -> &'static str {
        match self {
            Tier::Exact => "exact",
            Tier::TrailingWhitespace => "ignoring trailing whitespace",
            Tier::Whitespace => "ignoring surrounding whitespace",
            Tier::Unicode => "ignoring whitespace and Unicode punctuation",
        }
    }
}

/// Codex's table: dashes and minus to `-`, single quotes to `'`, double quotes to `"`, odd spaces
/// to a plain space.
fn ascii_punct(c: char) -> char {
    match c {
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{2018}'..='\u{201B}' => '\'',
        '\u{201C}'..='\u{201F}' => '"',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => other,
    }
}

pub fn normalise_unicode(s: &str) -> String {
    s.trim().chars().map(ascii_punct).collect()
}

fn matches_at<F: Fn(&str, &str) -> bool>(
    lines: &[&str],
    pattern: &[&str],
    at: usize,
    eq: &F,
) -> bool {
    pattern.iter().zip(&lines[at..]).all(|(p, l)| eq(l, p))
}

fn first_match<F: Fn(&str, &str) -> bool>(
    lines: &[&str],
    pattern: &[&str],
    from: usize,
    eq: F,
) -> Option<usize> {
    let last = lines.len() - pattern.len();
    (from..=last).find(|&i| matches_at(lines, pattern, i, &eq))
}

/// Find `pattern` in `lines` at or after `start`; with `eof` (`*** End of File`), only at the very
/// end, as in Codex. An empty pattern goes at `start`, or at the end with `eof` (Codex uses
/// `start` there too, which puts a hunk of a blank line and additions at the top of the file).
pub fn seek(lines: &[&str], pattern: &[&str], start: usize, eof: bool) -> Option<(usize, Tier)> {
    if pattern.is_empty() {
        let at = if eof {
            lines.len()
        } else {
            start.min(lines.len())
        };
        return Some((at, Tier::Exact));
    }
    let last = lines.len().checked_sub(pattern.len())?;
    let from = if eof { last } else { start };
    if from > last {
        return None;
    }
    seek_from(lines, pattern, from)
}

fn seek_from(lines: &[&str], pattern: &[&str], from: usize) -> Option<(usize, Tier)> {
    if let Some(i) = first_match(lines, pattern, from, |l, p| l == p) {
        return Some((i, Tier::Exact));
    }
    if let Some(i) = first_match(lines, pattern, from, |l, p| l.trim_end() == p.trim_end()) {
        return Some((i, Tier::TrailingWhitespace));
    }
    if let Some(i) = first_match(lines, pattern, from, |l, p| l.trim() == p.trim()) {
        return Some((i, Tier::Whitespace));
    }
    let wanted: Vec<String> = pattern.iter().map(|p| normalise_unicode(p)).collect();
    let last = lines.len() - pattern.len();
    (from..=last)
        .find(|&i| {
            wanted
                .iter()
                .zip(&lines[i..])
                .all(|(w, l)| l.trim().chars().map(ascii_punct).eq(w.chars()))
        })
        .map(|i| (i, Tier::Unicode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_in_order() {
        let lines = [
            "a",
            "foo   ",
            "\t  bar  ",
            "x \u{201C}q\u{201D} \u{2014} it\u{2019}s",
            "a",
        ];
        assert_eq!(seek(&lines, &["a"], 0, false), Some((0, Tier::Exact)));
        assert_eq!(seek(&lines, &["a"], 1, false), Some((4, Tier::Exact)));
        assert_eq!(
            seek(&lines, &["foo"], 0, false),
            Some((1, Tier::TrailingWhitespace))
        );
        assert_eq!(
            seek(&lines, &["bar"], 0, false),
            Some((2, Tier::Whitespace))
        );
        assert_eq!(
            seek(&lines, &["  x \"q\" - it's"], 0, false),
            Some((3, Tier::Unicode))
        );
        assert_eq!(seek(&lines, &["nothing"], 0, false), None);
        // A multi-line pattern must match on every line, in one tier.
        assert_eq!(
            seek(&lines, &["foo", "bar"], 0, false),
            Some((1, Tier::Whitespace))
        );
    }

    #[test]
    fn exact_beats_an_earlier_fuzzy_match() {
        let lines = ["foo ", "foo"];
        assert_eq!(seek(&lines, &["foo"], 0, false), Some((1, Tier::Exact)));
    }

    #[test]
    fn eof_only_at_the_end_and_edges() {
        let lines = ["x", "y", "x"];
        assert_eq!(seek(&lines, &["x"], 0, true), Some((2, Tier::Exact)));
        assert_eq!(seek(&lines, &["y"], 0, true), None);
        assert_eq!(
            seek(&lines, &["x "], 0, true),
            Some((2, Tier::TrailingWhitespace))
        );
        assert_eq!(seek(&lines, &[], 2, false), Some((2, Tier::Exact)));
        assert_eq!(seek(&lines, &[], 0, true), Some((3, Tier::Exact)));
        assert_eq!(seek(&lines, &["x", "y", "x", "z"], 0, false), None);
        assert_eq!(seek(&lines, &["x", "y"], 2, false), None);
        assert_eq!(seek(&[], &["x"], 0, false), None);
    }
}
