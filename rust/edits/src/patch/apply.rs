//! Applying an update's chunks to one file's text, in memory.
//!
//! Chunks are located in order, each at or after the end of the previous one. A chunk replaces
//! only the lines between its first and last change: context lines keep the file's own text and
//! endings (a fuzzy tier never rewrites them), and additions at the same spot keep patch order.
//! Inserted lines take the file's first line ending, as in Codex. Deliberate difference from
//! Codex: a pure addition with an `@@` anchor goes right after the anchor (Codex appends it at
//! the end of the file).

use super::parse::{old_lines, Chunk, ChunkLine};
use super::seek::{Seeker, Tier};
use super::text::{Line, Replacement, TextFile};

/// Where one chunk landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkReport {
    /// 1-based line in the original file where the chunk's lines start.
    pub line: usize,
    /// The matching tier that found it (exact first, then ever looser).
    pub tier: Tier,
}

/// A chunk that does not fit the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ChunkError {
    /// 1-based index of the failing chunk within the file's update.
    pub chunk: usize,
    /// What went wrong, as the model reads it.
    pub message: String,
}

fn show_lines(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Codex's second try for a chunk whose old side ends in an empty line (a blank line before
/// appended `+` lines, or one standing for the final newline): that line leaves the old side
/// (an empty context line stays as an added line), and an empty last line of the new side goes.
fn without_trailing_empty(ops: &[ChunkLine]) -> Option<Vec<ChunkLine>> {
    let last_old = ops.iter().rposition(ChunkLine::is_old)?;
    if !ops[last_old].text().is_empty() {
        return None;
    }
    let mut ops = ops.to_vec();
    match ops[last_old] {
        ChunkLine::Context(_) => ops[last_old] = ChunkLine::Insert(String::new()),
        _ => {
            ops.remove(last_old);
        }
    }
    if let Some(last_new) = ops.iter().rposition(ChunkLine::is_new) {
        if ops[last_new].text().is_empty() {
            ops.remove(last_new);
        }
    }
    Some(ops)
}

/// The replacement for `ops` matched at file line `at`: only the span from the first change to
/// the last; `None` when the chunk changes nothing.
fn replacement<'a>(
    ops: &'a [ChunkLine],
    file: &TextFile<'a>,
    at: usize,
    eol: &'a str,
) -> Option<Replacement<'a>> {
    let changed = |op: &ChunkLine| !matches!(op, ChunkLine::Context(_));
    let first = ops.iter().position(changed)?;
    let last = ops.iter().rposition(changed)?;
    let ops = &ops[first..=last];
    let start = at + first; // the leading context lines matched one file line each
    let mut line = start;
    let mut new = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            ChunkLine::Context(_) => {
                new.push(file.line(line));
                line += 1;
            }
            ChunkLine::Delete(_) => line += 1,
            ChunkLine::Insert(t) => new.push(Line { text: t, eol }),
        }
    }
    Some(Replacement {
        start,
        old_len: line - start,
        new,
    })
}

/// Which tool's rules a patch was written to: the grammar is one, where an update's chunks go
/// differs in two ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// The Codex CLI's `apply_patch`: every `@@` anchor must be found; a pure addition without
    /// one goes at the end of the file.
    #[default]
    Codex,
    /// OpenAI's `apply_patch` tool type (V4A), as its reference editor applies it: a lone
    /// anchor that is not found is passed over (the chunk's own lines place it), stacked ones
    /// must all be found; a pure addition without one goes where the previous chunk ended (the
    /// top of the file, for the first).
    V4a,
}

/// Apply an update's chunks to a file's text with Codex's rules: the new text and where each
/// chunk matched.
pub fn apply_chunks(
    path: &str,
    content: &str,
    chunks: &[Chunk],
) -> Result<(String, Vec<ChunkReport>), ChunkError> {
    apply_chunks_as(path, content, chunks, Dialect::Codex)
}

/// Apply an update's chunks with the rules of `dialect`.
pub fn apply_chunks_as(
    path: &str,
    content: &str,
    chunks: &[Chunk],
    dialect: Dialect,
) -> Result<(String, Vec<ChunkReport>), ChunkError> {
    let file = TextFile::parse(content);
    let texts = &file.texts;
    let seeker = Seeker::new(texts);
    let eol = file.default_eol();
    let mut replacements: Vec<Replacement<'_>> = Vec::with_capacity(chunks.len());
    let mut reports = Vec::with_capacity(chunks.len());
    let mut line_index = 0;
    // Built up front: replacements borrow their added lines from these.
    let second_tries: Vec<Option<Vec<ChunkLine>>> = chunks
        .iter()
        .map(|c| without_trailing_empty(&c.lines))
        .collect();
    for (n, chunk) in chunks.iter().enumerate() {
        let fail = |message: String| ChunkError {
            chunk: n + 1,
            message,
        };
        let advisory = dialect == Dialect::V4a && chunk.anchors.len() == 1;
        for anchor in &chunk.anchors {
            match seeker.seek(&[anchor.as_str()], line_index, false) {
                Some((i, _)) => line_index = i + 1,
                None if advisory => {}
                None => {
                    return Err(fail(format!(
                        "Failed to find context '{anchor}' in {path} (hunk {} at patch line {})",
                        n + 1,
                        chunk.patch_line
                    )))
                }
            }
        }
        if chunk.old_lines().is_empty() {
            let at = if chunk.anchors.is_empty() && dialect == Dialect::Codex {
                texts.len()
            } else {
                line_index
            };
            replacements.extend(replacement(&chunk.lines, &file, at, eol));
            reports.push(ChunkReport {
                line: at + 1,
                tier: Tier::Exact,
            });
            continue;
        }
        let mut ops: &[ChunkLine] = &chunk.lines;
        let mut found = seeker.seek(&old_lines(ops), line_index, chunk.end_of_file);
        if let (None, Some(second)) = (found, &second_tries[n]) {
            ops = second;
            found = seeker.seek(&old_lines(ops), line_index, chunk.end_of_file);
        }
        let Some((start, tier)) = found else {
            let anchors = if chunk.anchors.is_empty() {
                String::new()
            } else {
                format!(" after '{}'", chunk.anchors.join("' > '"))
            };
            return Err(fail(format!(
                "Failed to find expected lines in {path} (hunk {} at patch line {}{anchors}); \
                 these lines did not match the file, even ignoring whitespace and Unicode punctuation:\n{}",
                n + 1,
                chunk.patch_line,
                show_lines(&chunk.old_lines())
            )));
        };
        replacements.extend(replacement(ops, &file, start, eol));
        reports.push(ChunkReport {
            line: start + 1,
            tier,
        });
        line_index = start + old_lines(ops).len();
    }
    // Un-anchored pure additions sit at the end; a stable sort keeps patch order at one spot.
    replacements.sort_by_key(|r| r.start);
    let mut cursor = 0;
    for r in &replacements {
        if r.start < cursor {
            return Err(ChunkError {
                chunk: 0,
                message: format!("hunks overlap in {path} near line {}", r.start + 1),
            });
        }
        cursor = r.start + r.old_len;
    }
    let mut text = file.render(&replacements);
    if dialect == Dialect::V4a && !content.is_empty() && !content.ends_with('\n') {
        // V4A keeps a file without a final line ending without one (Codex gives it one).
        let end = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .map(str::len);
        text.truncate(end.unwrap_or(text.len()));
    }
    Ok((text, reports))
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse_patch;
    use super::super::parse::Hunk;
    use super::*;

    fn chunks_of(body: &str) -> Vec<Chunk> {
        let patch = format!("*** Begin Patch\n*** Update File: f\n{body}\n*** End Patch");
        match parse_patch(&patch).unwrap().remove(0) {
            Hunk::Update { chunks, .. } => chunks,
            _ => unreachable!(),
        }
    }

    fn apply(content: &str, body: &str) -> Result<String, ChunkError> {
        apply_chunks("f", content, &chunks_of(body)).map(|(s, _)| s)
    }

    #[test]
    fn basic_replace_and_multiple_chunks() {
        let src = "l1\nl2\nl3\nl4\n";
        assert_eq!(
            apply(src, "@@\n-l2\n+c2\n@@\n-l4\n+c4").unwrap(),
            "l1\nc2\nl3\nc4\n"
        );
        assert_eq!(apply(src, "@@\n l1\n-l2\n l3").unwrap(), "l1\nl3\nl4\n");
    }

    #[test]
    fn each_tier_reported() {
        let src = "a  \n\tb\n\u{201C}c\u{201D}\nd\n";
        let (out, rep) = apply_chunks("f", src, &chunks_of("@@\n-d\n+D\n")).unwrap();
        assert_eq!(out, "a  \n\tb\n\u{201C}c\u{201D}\nD\n");
        assert_eq!(rep[0].tier, Tier::Exact);
        let tiers: Vec<Tier> = ["-a\n+A", "-  b\n+B", "-\"c\"\n+C"]
            .iter()
            .map(|b| apply_chunks("f", src, &chunks_of(b)).unwrap().1[0].tier)
            .collect();
        assert_eq!(
            tiers,
            vec![Tier::TrailingWhitespace, Tier::Whitespace, Tier::Unicode]
        );
        // A fuzzy match keeps the file's own context line bytes.
        assert_eq!(
            apply(src, "@@\n   b\n-\"c\"\n+C").unwrap(),
            "a  \n\tb\nC\nd\n"
        );
    }

    #[test]
    fn anchors_and_pure_additions() {
        let src = "class A:\n    x = 1\nclass B:\n    x = 1\n";
        let out = apply(src, "@@ class B:\n-    x = 1\n+    x = 2").unwrap();
        assert_eq!(out, "class A:\n    x = 1\nclass B:\n    x = 2\n");
        assert_eq!(
            apply("l1\nl2\n", "@@\n+a1\n+a2").unwrap(),
            "l1\nl2\na1\na2\n"
        );
        assert_eq!(
            apply(src, "@@ class A:\n+    y = 0").unwrap(),
            "class A:\n    y = 0\n    x = 1\nclass B:\n    x = 1\n"
        );
        let err = apply(src, "@@ class C:\n-x\n+y").unwrap_err();
        assert!(
            err.message.contains("Failed to find context 'class C:'"),
            "{err}"
        );
    }

    #[test]
    fn end_of_file_and_trailing_newline() {
        assert_eq!(
            apply("x\ny\nx\n", "@@\n-x\n+z\n*** End of File").unwrap(),
            "x\ny\nz\n"
        );
        assert_eq!(
            apply("no newline", "@@\n-no newline\n+a\n+b").unwrap(),
            "a\nb\n"
        );
        // Trailing empty context line standing for the final newline.
        assert_eq!(apply("a\nb\n", "@@\n-b\n+c\n ").unwrap(), "a\nc\n");
    }

    #[test]
    fn line_endings_tabs_and_bom_survive() {
        let src = "\u{feff}one\r\n\ttwo\nthree\r\n";
        // Added lines take the file's first line ending (Codex), context lines keep their own.
        let out = apply(src, "@@\n one\n-\ttwo\n+\tTWO\n+\tadded\n three").unwrap();
        assert_eq!(out, "\u{feff}one\r\n\tTWO\r\n\tadded\r\nthree\r\n");
        let out = apply(src, "@@\n one\n+new").unwrap();
        assert_eq!(out, "\u{feff}one\r\nnew\r\n\ttwo\nthree\r\n");
    }

    #[test]
    fn v4a_places_chunks_as_openais_reference_does() {
        use super::super::parse::{parse_create_diff, parse_update_diff};
        let v4a = |content: &str, diff: &str| {
            let chunks = parse_update_diff(diff).unwrap();
            apply_chunks_as("f", content, &chunks, Dialect::V4a).map(|(s, _)| s)
        };
        // A lone anchor not found is passed over; Codex fails on it.
        assert_eq!(v4a("a\nb\n", "@@ nowhere\n a\n-b\n+B\n").unwrap(), "a\nB\n");
        assert!(apply("a\nb\n", "@@ nowhere\n a\n-b\n+B").is_err());
        // Stacked anchors must all be found.
        assert!(v4a("a\nb\n", "@@ nowhere\n@@ neither\n a\n-b\n+B\n").is_err());
        // A pure addition without an anchor goes where the last chunk ended (the top, first).
        assert_eq!(v4a("a\nb\n", "@@\n+top\n").unwrap(), "top\na\nb\n");
        assert_eq!(apply("a\nb\n", "@@\n+top").unwrap(), "a\nb\ntop\n");
        // A file without a final newline keeps it that way.
        assert_eq!(v4a("a\nb", "@@\n a\n-b\n+B\n").unwrap(), "a\nB");
        assert_eq!(v4a("a\r\nb", "@@\n a\n-b\n+B\n").unwrap(), "a\r\nB");
        // A create diff is its `+` lines, without a final line ending; anything else fails.
        assert_eq!(parse_create_diff("+x\n+\n+y\n").unwrap(), "x\n\ny");
        assert_eq!(parse_create_diff("+x\r\n+y\r\n").unwrap(), "x\r\ny");
        assert!(parse_create_diff("+x\ny\n").is_err());
        assert!(parse_update_diff("").is_err());
        assert!(parse_update_diff("@@\n a\n*** Update File: g\n").is_err());
    }

    #[test]
    fn failure_names_hunk_and_lines() {
        let err = apply("a\nb\n", "@@\n-a\n+A\n@@\n-missing\n+x").unwrap_err();
        assert_eq!(err.chunk, 2);
        assert!(
            err.message.contains("hunk 2") && err.message.contains("    missing"),
            "{err}"
        );
    }
}
