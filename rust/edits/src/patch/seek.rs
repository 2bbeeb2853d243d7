//! Locating a chunk's lines in a file: Codex's four tiers, each tried over the whole range before
//! the next, first match wins. Tier 4 maps the punctuation models tend to "prettify" to ASCII.

use std::borrow::Cow;
use std::cell::{Cell, OnceCell};

use rustc_hash::FxHashMap;

/// How loosely a chunk's lines had to be compared to be found: Codex's four tiers, tried in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// Byte for byte.
    Exact,
    /// Ignoring whitespace at line ends.
    TrailingWhitespace,
    /// Ignoring whitespace at both ends.
    Whitespace,
    /// Also treating look-alike punctuation (dashes, quotes, spaces) as ASCII.
    Unicode,
}

impl Tier {
    /// The words messages use, e.g. `"exact"`.
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

/// A line as tier `tier` compares it.
fn key(tier: Tier, line: &str) -> Cow<'_, str> {
    match tier {
        Tier::Exact => Cow::Borrowed(line),
        Tier::TrailingWhitespace => Cow::Borrowed(line.trim_end()),
        Tier::Whitespace => Cow::Borrowed(line.trim()),
        Tier::Unicode => {
            let t = line.trim();
            if t.chars().all(|c| ascii_punct(c) == c) {
                Cow::Borrowed(t)
            } else {
                Cow::Owned(t.chars().map(ascii_punct).collect())
            }
        }
    }
}

const TIERS: [Tier; 4] = [
    Tier::Exact,
    Tier::TrailingWhitespace,
    Tier::Whitespace,
    Tier::Unicode,
];

/// Each tier's lines, as that tier compares them, and where each occurs (ascending).
type Positions<'a> = FxHashMap<Cow<'a, str>, Vec<u32>>;

/// Seeks one file's chunks. The first seeks scan forward line by line, which is cheapest for
/// the usual patch (each hunk a little after the last). Once the scans have cost a few passes
/// over the file (hunks that only match in a later tier make every earlier tier scan to the
/// end: quadratic), each tier answers from an index of its line keys instead: candidates are
/// the positions of the pattern's rarest line, so the whole patch stays linear in the file
/// plus the hunks. Both ways give the same answer: the first position at or after `from`, in
/// the first tier that has one.
pub struct Seeker<'a> {
    lines: &'a [&'a str],
    scanned: Cell<usize>,
    index: [OnceCell<Positions<'a>>; 4],
}

/// Scanning stops and indexes take over after this many passes over the file.
const SCAN_PASSES: usize = 4;

impl<'a> Seeker<'a> {
    pub fn new(lines: &'a [&'a str]) -> Self {
        Self {
            lines,
            scanned: Cell::new(0),
            index: Default::default(),
        }
    }

    /// Find `pattern` at or after `start`; with `eof` (`*** End of File`), only at the very end,
    /// as in Codex. An empty pattern goes at `start`, or at the end with `eof` (Codex uses
    /// `start` there too, which puts a hunk of a blank line and additions at the top of the
    /// file).
    pub fn seek(&self, pattern: &[&str], start: usize, eof: bool) -> Option<(usize, Tier)> {
        let lines = self.lines;
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
        TIERS.iter().find_map(|&tier| {
            self.first_match(tier, pattern, from, last)
                .map(|i| (i, tier))
        })
    }

    fn first_match(&self, tier: Tier, pattern: &[&str], from: usize, last: usize) -> Option<usize> {
        let wanted: Vec<Cow<'_, str>> = pattern.iter().map(|p| key(tier, p)).collect();
        let fits = |i: usize| {
            wanted
                .iter()
                .zip(&self.lines[i..])
                .all(|(w, l)| key(tier, l) == *w)
        };
        let budget = SCAN_PASSES * self.lines.len().max(64);
        if self.scanned.get() < budget {
            let found = (from..=last).find(|&i| fits(i));
            let cost = found.map_or(last + 1, |i| i + 1) - from;
            self.scanned.set(self.scanned.get() + cost);
            return found;
        }
        let index = self.index[tier as usize].get_or_init(|| {
            let mut map: Positions<'a> = FxHashMap::default();
            for (i, line) in self.lines.iter().enumerate() {
                map.entry(key(tier, line)).or_default().push(i as u32);
            }
            map
        });
        // The pattern line with the fewest occurrences anchors the candidates.
        let mut anchor: Option<(usize, &Vec<u32>)> = None;
        for (j, w) in wanted.iter().enumerate() {
            let at = index.get(w.as_ref())?;
            if anchor.is_none_or(|(_, best)| at.len() < best.len()) {
                anchor = Some((j, at));
            }
        }
        let (j, at) = anchor?;
        let first = at.partition_point(|&q| (q as usize) < from + j);
        at[first..]
            .iter()
            .map(|&q| q as usize - j)
            .take_while(|&i| i <= last)
            .find(|&i| fits(i))
    }
}

/// [`Seeker::seek`] for one pattern.
pub fn seek(lines: &[&str], pattern: &[&str], start: usize, eof: bool) -> Option<(usize, Tier)> {
    Seeker::new(lines).seek(pattern, start, eof)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain definition: each tier scanned over the whole range, first match wins.
    fn naive(lines: &[&str], pattern: &[&str], start: usize, eof: bool) -> Option<(usize, Tier)> {
        if pattern.is_empty() {
            return Some((
                if eof {
                    lines.len()
                } else {
                    start.min(lines.len())
                },
                Tier::Exact,
            ));
        }
        let last = lines.len().checked_sub(pattern.len())?;
        let from = if eof { last } else { start };
        TIERS.iter().find_map(|&tier| {
            (from..=last)
                .find(|&i| {
                    pattern
                        .iter()
                        .zip(&lines[i..])
                        .all(|(p, l)| key(tier, l) == key(tier, p))
                })
                .map(|i| (i, tier))
        })
    }

    #[test]
    fn scanning_and_indexed_seeks_agree_with_the_definition() {
        let vocab = [
            "a",
            "a ",
            " a",
            "\ta",
            "b",
            "b  ",
            "}",
            "",
            " ",
            "x \u{201C}q\u{201D}",
            "x \"q\"",
            "\u{2014}",
            "-",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for _ in 0..3000 {
            let len = next(40);
            let lines: Vec<&str> = (0..len).map(|_| vocab[next(vocab.len())]).collect();
            let plen = next(4);
            let pattern: Vec<&str> = (0..plen).map(|_| vocab[next(vocab.len())]).collect();
            let start = next(len + 2);
            let eof = next(5) == 0;
            let want = naive(&lines, &pattern, start, eof);
            assert_eq!(
                seek(&lines, &pattern, start, eof),
                want,
                "{lines:?} {pattern:?} {start}"
            );
            let indexed = Seeker::new(&lines);
            indexed.scanned.set(usize::MAX); // the index path from the first seek
            assert_eq!(
                indexed.seek(&pattern, start, eof),
                want,
                "{lines:?} {pattern:?} {start}"
            );
        }
    }

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
