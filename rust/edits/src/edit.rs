//! Exact-string edit application (the `edit` built-in tool).
//!
//! Works on the file's bytes, so nothing outside the replaced spans changes: a BOM, mixed line
//! endings, tabs and even non-UTF-8 (Latin-1…) bytes survive. When `old_string` is written with
//! LF but the file uses CRLF (or the reverse), the strings are adapted to the file's endings. On
//! a miss, the error points at the nearest near-match so the model can correct itself.

use memchr::memmem;

use crate::patch::{seek, Tier};

/// A checked edit, not yet applied: where `old` was found and what goes there instead. The new
/// file is `parts(content)` in order, so it can be streamed out without building a copy first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditPlan {
    /// Byte offsets of the replaced occurrences.
    pub hits: Vec<usize>,
    /// The length of what each occurrence replaces, in bytes.
    pub old_len: usize,
    /// What goes in its place (in the file's line endings).
    pub new_bytes: Vec<u8>,
    /// 1-based line (in the original file) where each replacement starts (of the first
    /// `max_lines`, see `plan_edit_reporting`).
    pub lines: Vec<usize>,
    /// The strings were rewritten to the file's line endings before matching.
    pub eol_adapted: bool,
}

impl EditPlan {
    /// How many occurrences are replaced.
    pub fn replacements(&self) -> usize {
        self.hits.len()
    }

    /// The new file's length, given the old one's.
    pub fn output_len(&self, content_len: usize) -> usize {
        content_len + self.hits.len() * self.new_bytes.len() - self.hits.len() * self.old_len
    }

    /// The new file's pieces in order, slices of the old one and the replacement: the one walk
    /// over the hits that `parts`, `fill` and `output` share.
    fn each_part<'a>(&'a self, content: &'a [u8], mut part: impl FnMut(&'a [u8])) {
        let mut cursor = 0;
        for &h in &self.hits {
            part(&content[cursor..h]);
            part(&self.new_bytes);
            cursor = h + self.old_len;
        }
        part(&content[cursor..]);
    }

    /// The new file in one buffer (for many replacements: one write instead of two per hit).
    pub fn output(&self, content: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.output_len(content.len()));
        self.each_part(content, |p| out.extend_from_slice(p));
        out
    }

    /// The new file as slices of the old one and the replacement, in order.
    pub fn parts<'a>(&'a self, content: &'a [u8]) -> Vec<&'a [u8]> {
        let mut out = Vec::with_capacity(self.hits.len() * 2 + 1);
        self.each_part(content, |p| out.push(p));
        out
    }

    /// Write the new file into `buf`, which must be `output_len` bytes long (straight from the
    /// hits: no list of parts, which for a replace_all is two entries per occurrence).
    pub fn fill(&self, content: &[u8], buf: &mut [u8]) {
        let mut at = 0;
        self.each_part(content, |p| {
            buf[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        });
    }
}

/// An edit applied in memory (the tests' view of a plan; the tools stream the plan to disk).
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
struct EditOutcome {
    bytes: Vec<u8>,
    replacements: usize,
    lines: Vec<usize>,
    eol_adapted: bool,
}

/// Where the closest thing to `old_string` is, for the error message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NearMatch {
    /// Its 1-based line.
    pub line: usize,
    /// How it differs, e.g. "the indentation differs".
    pub note: String,
    /// The file's lines there: (line number, text).
    pub excerpt: Vec<(usize, String)>,
}

impl std::fmt::Display for NearMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "The nearest near-match is at line {}: {}.",
            self.line, self.note
        )?;
        for (n, text) in &self.excerpt {
            write!(f, "\n{n:>6}\t{text}")?;
        }
        Ok(())
    }
}

/// Why an edit cannot be made (nothing was changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// An empty `old_string`.
    #[error("old_string must not be empty (use write_file to create or overwrite a file)")]
    EmptyOld,
    /// `old_string` and `new_string` are the same.
    #[error("old_string and new_string are identical; nothing to change")]
    Identical,
    /// `old_string` is not in the file.
    #[error("old_string was not found; no change was made. {}", describe_near(.near))]
    NotFound {
        /// The closest thing to it, if anything is close.
        near: Option<NearMatch>,
    },
    /// `old_string` is there more than once and `replace_all` is off.
    #[error(
        "old_string is not unique: found {count} occurrences, starting at lines {}; no change was \
         made. Add surrounding lines to old_string to make it unique, or set replace_all=true.",
        join_lines(.lines)
    )]
    NotUnique {
        /// How many times.
        count: usize,
        /// The lines they start at.
        lines: Vec<usize>,
    },
    /// A non-ASCII `new_string` for a file that is not UTF-8.
    #[error(
        "the file is not valid UTF-8 (first bad byte at offset {offset}, probably Latin-1 or another \
         legacy encoding) and new_string contains non-ASCII characters, which would mix encodings; \
         no change was made. Use only ASCII in new_string for this file."
    )]
    Encoding {
        /// The first byte that is not UTF-8.
        offset: usize,
    },
}

fn describe_near(near: &Option<NearMatch>) -> String {
    match near {
        Some(n) => n.to_string(),
        None => "No similar text was found either; read the file again before editing.".into(),
    }
}

fn join_lines(lines: &[usize]) -> String {
    let mut shown: Vec<String> = lines.iter().take(10).map(usize::to_string).collect();
    if lines.len() > 10 {
        shown.push("…".into());
    }
    shown.join(", ")
}

fn find_all(content: &[u8], needle: &[u8]) -> Vec<usize> {
    memmem::find_iter(content, needle).collect()
}

/// Rewrite the strings' line endings to the file's when they differ, and the file has a CRLF.
fn adapt_eol(content: &[u8], old: &str, new: &str) -> Option<(String, String)> {
    let file_crlf = memmem::find(content, b"\r\n").is_some();
    if old.contains("\r\n") {
        Some((old.replace("\r\n", "\n"), new.replace("\r\n", "\n")))
    } else if old.contains('\n') && file_crlf {
        let to_crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
        Some((to_crlf(old), to_crlf(new)))
    } else {
        None
    }
}

/// Plan and apply in one go (the new bytes in memory).
#[cfg(test)]
fn apply_edit(
    content: &[u8],
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<EditOutcome, EditError> {
    let plan = plan_edit(content, old, new, replace_all)?;
    Ok(EditOutcome {
        bytes: plan.parts(content).concat(),
        replacements: plan.replacements(),
        lines: plan.lines,
        eol_adapted: plan.eol_adapted,
    })
}

/// Lines edit reports on disk: a replace_all of 334,000 occurrences has a count, not a list to
/// read, and finding every line would cost as much as the replacing.
pub const REPORTED_LINES: usize = 1000;

/// Where `old` is and what replaces it, with the line of every occurrence.
pub fn plan_edit(
    content: &[u8],
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<EditPlan, EditError> {
    plan_edit_reporting(content, old, new, replace_all, usize::MAX)
}

/// `plan_edit`, finding the lines of the first `max_lines` occurrences only.
pub fn plan_edit_reporting(
    content: &[u8],
    old: &str,
    new: &str,
    replace_all: bool,
    max_lines: usize,
) -> Result<EditPlan, EditError> {
    if old.is_empty() {
        return Err(EditError::EmptyOld);
    }
    if old == new {
        return Err(EditError::Identical);
    }
    let mut old_bytes = old.as_bytes().to_vec();
    let mut new_bytes = new.as_bytes().to_vec();
    let mut hits = find_all(content, &old_bytes);
    let mut eol_adapted = false;
    if hits.is_empty() {
        if let Some((o, n)) = adapt_eol(content, old, new) {
            let adapted = find_all(content, o.as_bytes());
            if !adapted.is_empty() {
                hits = adapted;
                old_bytes = o.into_bytes();
                new_bytes = n.into_bytes();
                eol_adapted = true;
            }
        }
    }
    if hits.is_empty() {
        return Err(EditError::NotFound {
            near: near_match(content, old),
        });
    }
    let lines = line_numbers(content, &hits[..hits.len().min(max_lines)]);
    if hits.len() > 1 && !replace_all {
        return Err(EditError::NotUnique {
            count: hits.len(),
            lines,
        });
    }
    if !new_bytes.is_ascii() {
        if let Err(e) = std::str::from_utf8(content) {
            return Err(EditError::Encoding {
                offset: e.valid_up_to(),
            });
        }
    }
    Ok(EditPlan {
        hits,
        old_len: old_bytes.len(),
        new_bytes,
        lines,
        eol_adapted,
    })
}

fn line_numbers(content: &[u8], offsets: &[usize]) -> Vec<usize> {
    // Offsets are increasing: count the newlines between consecutive hits. A short gap (the
    // common case of a replace_all, hits a line or two apart) is counted by a plain loop the
    // compiler vectorises; memchr's searcher pays off only on longer ones.
    let mut line = 1;
    let mut from = 0;
    offsets
        .iter()
        .map(|&o| {
            let gap = &content[from..o];
            line += if gap.len() < 256 {
                gap.iter().filter(|&&b| b == b'\n').count()
            } else {
                memchr::memchr_iter(b'\n', gap).count()
            };
            from = o;
            line
        })
        .collect()
}

const EXCERPT_LINES: usize = 4;
const EXCERPT_CHARS: usize = 160;
const SIMILAR_LENGTH_CANDIDATES: usize = 5000;

fn clip(s: &str) -> String {
    match s.char_indices().nth(EXCERPT_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn leading_ws(s: &str) -> &str {
    &s[..s.len() - s.trim_start().len()]
}

fn indent_note(file_line: &str, wanted: &str) -> &'static str {
    let (f, w) = (leading_ws(file_line), leading_ws(wanted));
    if f.contains('\t') && !w.contains('\t') && !w.is_empty() {
        " (the file indents with tabs, old_string with spaces)"
    } else if w.contains('\t') && !f.contains('\t') && !f.is_empty() {
        " (the file indents with spaces, old_string with tabs)"
    } else {
        ""
    }
}

/// The closest place to `old` in the file: first the patch tiers on whole lines, then the line
/// most similar to old_string's first non-blank line.
pub fn near_match(content: &[u8], old: &str) -> Option<NearMatch> {
    let text = String::from_utf8_lossy(content);
    let file: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let wanted: Vec<&str> = old
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let first = wanted.iter().position(|l| !l.trim().is_empty())?;
    let last = wanted.iter().rposition(|l| !l.trim().is_empty())?;
    let wanted = &wanted[first..=last];
    let excerpt = |at: usize| -> Vec<(usize, String)> {
        (at..file.len().min(at + wanted.len().clamp(1, EXCERPT_LINES)))
            .map(|i| (i + 1, clip(file[i])))
            .collect()
    };
    if let Some((at, tier)) = seek(&file, wanted, 0, false) {
        let note = match tier {
            Tier::Exact => {
                "the same lines, but old_string's first or last line is cut differently".to_string()
            }
            Tier::TrailingWhitespace => "the same text except trailing whitespace".to_string(),
            Tier::Whitespace => format!(
                "the same text except indentation or surrounding whitespace{}",
                indent_note(file[at], wanted[0])
            ),
            Tier::Unicode => {
                "the same text except quotes, dashes or special spaces (Unicode punctuation)"
                    .to_string()
            }
        };
        return Some(NearMatch {
            line: at + 1,
            note,
            excerpt: excerpt(at),
        });
    }
    let probe = wanted[0];
    let at = most_similar_line(&file, probe.trim())?;
    // How far do the following lines agree (ignoring surrounding whitespace)?
    let agree = wanted
        .iter()
        .zip(&file[at..])
        .take_while(|(w, f)| w.trim() == f.trim())
        .count();
    let note = if agree == 0 {
        let score = strsim::normalized_levenshtein(file[at].trim(), probe.trim());
        format!(
            "the line most similar to old_string's first line ({:.0}% similar){}",
            score * 100.0,
            indent_note(file[at], probe)
        )
    } else if at + agree < file.len() && agree < wanted.len() {
        format!(
            "old_string's first {agree} line(s) match there, then line {} differs: the file has {:?}, old_string has {:?}",
            at + agree + 1,
            clip(file[at + agree]),
            clip(wanted[agree])
        )
    } else {
        "old_string's lines match there as whole lines, but not as an exact substring".to_string()
    };
    Some(NearMatch {
        line: at + 1,
        note,
        excerpt: excerpt(at),
    })
}

/// Rank lines by shared words with `probe`, then pick the best few by edit distance.
fn most_similar_line(file: &[&str], probe: &str) -> Option<usize> {
    let words: Vec<&str> = probe.split_whitespace().collect();
    if words.is_empty() {
        return None;
    }
    let mut scored: Vec<(usize, usize)> = file
        .iter()
        .enumerate()
        .filter_map(|(i, line)| {
            let shared = words.iter().filter(|w| line.contains(*w)).count();
            (shared > 0).then_some((shared, i))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(32);
    if scored.is_empty() {
        // No shared word (a typo in every word): compare lines of a similar length instead.
        let len = probe.chars().count();
        scored = file
            .iter()
            .enumerate()
            .filter(|(_, l)| {
                let n = l.trim().chars().count();
                n * 2 >= len && n <= len * 2
            })
            .take(SIMILAR_LENGTH_CANDIDATES)
            .map(|(i, _)| (0, i))
            .collect();
    }
    let probe_clipped = clip(probe);
    let best = scored
        .iter()
        .map(|&(_, i)| {
            (
                strsim::normalized_levenshtein(&clip(file[i].trim()), &probe_clipped),
                i,
            )
        })
        .fold(None, |best: Option<(f64, usize)>, cur| match best {
            Some(b) if b.0 >= cur.0 => Some(b),
            _ => Some(cur),
        })?;
    (best.0 >= 0.3).then_some(best.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_replace_reports_line() {
        let out = apply_edit(b"a\nb\nc\n", "b", "B", false).unwrap();
        assert_eq!(out.bytes, b"a\nB\nc\n");
        assert_eq!((out.replacements, out.lines), (1, vec![2]));
    }

    #[test]
    fn not_unique_unless_replace_all() {
        let err = apply_edit(b"x\nx\ny\nx", "x", "z", false).unwrap_err();
        assert_eq!(
            err,
            EditError::NotUnique {
                count: 3,
                lines: vec![1, 2, 4]
            }
        );
        assert!(err.to_string().contains("replace_all"));
        let out = apply_edit(b"x\nx\ny\nx", "x", "z", true).unwrap();
        assert_eq!(out.bytes, b"z\nz\ny\nz");
        assert_eq!(out.lines, vec![1, 2, 4]);
    }

    #[test]
    fn bad_arguments() {
        assert_eq!(apply_edit(b"a", "", "b", false), Err(EditError::EmptyOld));
        assert_eq!(apply_edit(b"a", "a", "a", false), Err(EditError::Identical));
    }

    #[test]
    fn crlf_and_mixed_endings_and_tabs_kept() {
        let src = b"\xef\xbb\xbfone\r\n\ttwo\r\nthree\nfour\r\n";
        // LF in old_string, CRLF in the file: adapted, and the replacement gets CRLF too.
        let out = apply_edit(src, "one\n\ttwo", "1\n\t2", false).unwrap();
        assert!(out.eol_adapted);
        assert_eq!(out.bytes, b"\xef\xbb\xbf1\r\n\t2\r\nthree\nfour\r\n");
        // An exact match over the file's own LF keeps every other ending as it was.
        let out = apply_edit(src, "three\nfour", "3\n4", false).unwrap();
        assert!(!out.eol_adapted);
        assert_eq!(out.bytes, b"\xef\xbb\xbfone\r\n\ttwo\r\n3\n4\r\n");
        let out = apply_edit(b"a\nb\n", "a\r\nb", "x\r\ny", false).unwrap();
        assert_eq!(out.bytes, b"x\ny\n");
    }

    #[test]
    fn latin1_bytes_kept_or_refused() {
        let src = b"caf\xe9 = 1\nname = 'x'\n";
        let out = apply_edit(src, "'x'", "'y'", false).unwrap();
        assert_eq!(out.bytes, b"caf\xe9 = 1\nname = 'y'\n");
        let err = apply_edit(src, "'x'", "'\u{e9}'", false).unwrap_err();
        assert!(matches!(err, EditError::Encoding { offset: 3 }), "{err}");
    }

    #[test]
    fn near_match_for_tabs_whitespace_and_typos() {
        let src = b"fn main() {\n\tlet x = 1;\n\tprintln!(\"{x}\");\n}\n";
        let err = apply_edit(src, "    let x = 1;\n    println!(\"{x}\");", "", false).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("line 2") && msg.contains("tabs"), "{msg}");
        let EditError::NotFound { near: Some(n) } = err else {
            panic!()
        };
        assert_eq!(n.excerpt[0], (2, "\tlet x = 1;".to_string()));
        let msg = apply_edit(src, "\tlet x = 1;\n\tprintln!(\"{y}\");", "", false)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("then line 3 differs"), "{msg}");
        let msg = apply_edit(src, "printn!(\"{x}\")", "", false)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("line 3") && msg.contains("similar"), "{msg}");
        let msg = apply_edit(src, "zzz qqq", "", false)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("No similar text"), "{msg}");
    }
}
