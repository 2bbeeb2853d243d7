//! Parser for the Codex CLI patch grammar (`*** Begin Patch` … `*** End Patch`).
//!
//! Follows Codex's parser: the whole text is trimmed, marker lines are compared trimmed, a
//! heredoc wrapper (`<<'EOF'` … `EOF`) is stripped, the first chunk of an update may omit `@@`,
//! an empty line inside an update is an empty context line. Two additions: consecutive `@@ ctx`
//! lines are kept as nested anchors of the same chunk, and blank lines between file sections are
//! skipped (Codex refuses them as invalid hunk headers).

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const EOF_MARK: &str = "*** End of File";

/// One line of a chunk, by its first character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkLine {
    /// ` `: a line kept.
    Context(String),
    /// `-`: a line removed.
    Delete(String),
    /// `+`: a line added.
    Insert(String),
}

/// One `@@` section of an update.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chunk {
    /// `@@ <text>` anchors, located one after the other before the lines.
    pub anchors: Vec<String>,
    /// The chunk's lines, in order.
    pub lines: Vec<ChunkLine>,
    /// `*** End of File`: the chunk must match at the end of the file.
    pub end_of_file: bool,
    /// 1-based line of the chunk's first line in the patch, for error messages.
    pub patch_line: usize,
}

impl ChunkLine {
    /// The line without its marker.
    pub fn text(&self) -> &str {
        match self {
            ChunkLine::Context(t) | ChunkLine::Delete(t) | ChunkLine::Insert(t) => t,
        }
    }

    /// On the old side: a line the file must contain (context or deleted).
    pub fn is_old(&self) -> bool {
        !matches!(self, ChunkLine::Insert(_))
    }

    /// On the new side: a line the file ends up with (context or inserted).
    pub fn is_new(&self) -> bool {
        !matches!(self, ChunkLine::Delete(_))
    }
}

/// The lines the file must contain (context and deleted lines, in order).
pub fn old_lines(lines: &[ChunkLine]) -> Vec<&str> {
    lines
        .iter()
        .filter(|l| l.is_old())
        .map(ChunkLine::text)
        .collect()
}

impl Chunk {
    /// The lines the file must contain (see [`old_lines`]).
    pub fn old_lines(&self) -> Vec<&str> {
        old_lines(&self.lines)
    }
}

/// One file operation of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hunk {
    /// `*** Add File:`, a new file.
    Add {
        /// The file.
        path: String,
        /// Its contents.
        contents: String,
    },
    /// `*** Delete File:`.
    Delete {
        /// The file.
        path: String,
    },
    /// `*** Update File:`, changed in place or moved.
    Update {
        /// The file.
        path: String,
        /// `*** Move to:`, where it goes.
        move_to: Option<String>,
        /// Its `@@` sections.
        chunks: Vec<Chunk>,
    },
}

impl Hunk {
    /// The file it operates on (its source, for a move).
    pub fn path(&self) -> &str {
        match self {
            Hunk::Add { path, .. } | Hunk::Delete { path } | Hunk::Update { path, .. } => path,
        }
    }
}

/// A patch that does not follow the grammar (Codex's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The patch as a whole (its begin and end markers).
    #[error("Invalid patch: {0}")]
    Patch(String),
    /// One file operation.
    #[error("Invalid patch hunk on line {line}: {message}")]
    Hunk {
        /// The line of the patch it is on (1-based).
        line: usize,
        /// What is wrong.
        message: String,
    },
}

fn hunk_err(line: usize, message: impl Into<String>) -> ParseError {
    ParseError::Hunk {
        line,
        message: message.into(),
    }
}

/// Drop the `<<'EOF'` … `EOF` wrapper some models put around the patch.
fn strip_heredoc<'a>(lines: &'a [&'a str]) -> &'a [&'a str] {
    let opens = matches!(
        lines.first().map(|l| l.trim()),
        Some("<<EOF" | "<<'EOF'" | "<<\"EOF\"")
    );
    let closes = lines.last().is_some_and(|l| l.trim_end().ends_with("EOF"));
    if lines.len() >= 4 && opens && closes {
        &lines[1..lines.len() - 1]
    } else {
        lines
    }
}

/// Parse a Codex-style patch (`*** Begin Patch` ... `*** End Patch`) into its file operations.
pub fn parse_patch(text: &str) -> Result<Vec<Hunk>, ParseError> {
    let all: Vec<&str> = text.trim().lines().collect();
    let lines = strip_heredoc(&all);
    // Line numbers in messages count from the first line of the (trimmed) patch.
    let offset = if lines.len() == all.len() { 1 } else { 2 };
    match lines.first() {
        Some(first) if first.trim() == BEGIN => {}
        _ => {
            return Err(ParseError::Patch(format!(
                "The first line of the patch must be '{BEGIN}'"
            )))
        }
    }
    if lines.len() < 2 || lines[lines.len() - 1].trim() != END {
        return Err(ParseError::Patch(format!(
            "The last line of the patch must be '{END}'"
        )));
    }
    let body = &lines[1..lines.len() - 1];
    let mut parser = Parser {
        lines: body,
        pos: 0,
        first_line: offset + 1,
    };
    let mut hunks = Vec::new();
    while parser.pos < body.len() {
        if body[parser.pos].trim().is_empty() {
            parser.pos += 1;
            continue;
        }
        hunks.push(parser.hunk()?);
    }
    Ok(hunks)
}

/// The lines of a diff sent without the patch's envelope (OpenAI's `apply_patch` tool type, V4A):
/// split on `\n` or `\r\n`, a final empty line (the text's last newline) dropped.
fn diff_lines(diff: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = diff
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// The chunks of a V4A `update_file` diff: the body of one `*** Update File:` section, parsed
/// as that section's is (the first chunk may omit `@@`; `*** End of File` marks a chunk that
/// must match at the end).
pub fn parse_update_diff(diff: &str) -> Result<Vec<Chunk>, ParseError> {
    let lines = diff_lines(diff);
    let mut parser = Parser {
        lines: &lines,
        pos: 0,
        first_line: 1,
    };
    let mut chunks = Vec::new();
    while let Some(line) = parser.peek() {
        if line.starts_with("***") {
            return Err(hunk_err(parser.line_no(), format!("Invalid Line: {line}")));
        }
        chunks.push(parser.chunk(chunks.is_empty())?);
    }
    if chunks.is_empty() {
        return Err(hunk_err(1, "the update diff is empty"));
    }
    Ok(chunks)
}

/// The text of a V4A `create_file` diff: every line `+`, joined with the diff's own line ending
/// (`\r\n` if it has any), without a final one (as OpenAI's reference editor writes it).
pub fn parse_create_diff(diff: &str) -> Result<String, ParseError> {
    let newline = if diff.contains("\r\n") { "\r\n" } else { "\n" };
    let lines = diff_lines(diff);
    let mut contents = Vec::with_capacity(lines.len());
    for (n, line) in lines.iter().enumerate() {
        let Some(added) = line.strip_prefix('+') else {
            return Err(hunk_err(n + 1, format!("Invalid Add File Line: {line}")));
        };
        contents.push(added);
    }
    Ok(contents.join(newline))
}

struct Parser<'a> {
    lines: &'a [&'a str],
    pos: usize,
    first_line: usize,
}

impl<'a> Parser<'a> {
    fn line_no(&self) -> usize {
        self.pos + self.first_line
    }

    fn peek(&self) -> Option<&'a str> {
        self.lines.get(self.pos).copied()
    }

    fn path(&self, rest: &str) -> Result<String, ParseError> {
        let path = rest.trim();
        if path.is_empty() {
            return Err(hunk_err(self.line_no(), "file path is missing"));
        }
        Ok(path.to_string())
    }

    fn hunk(&mut self) -> Result<Hunk, ParseError> {
        let header = self.lines[self.pos].trim();
        if let Some(rest) = header.strip_prefix(ADD) {
            let path = self.path(rest)?;
            self.pos += 1;
            let mut contents = String::new();
            while let Some(line) = self.peek() {
                let Some(added) = line.strip_prefix('+') else {
                    break;
                };
                contents.push_str(added);
                contents.push('\n');
                self.pos += 1;
            }
            return Ok(Hunk::Add { path, contents });
        }
        if let Some(rest) = header.strip_prefix(DELETE) {
            let path = self.path(rest)?;
            self.pos += 1;
            return Ok(Hunk::Delete { path });
        }
        if let Some(rest) = header.strip_prefix(UPDATE) {
            let path = self.path(rest)?;
            let header_line = self.line_no();
            self.pos += 1;
            let mut move_to = None;
            if let Some(dest) = self.peek().and_then(|l| l.trim().strip_prefix(MOVE)) {
                move_to = Some(self.path(dest)?);
                self.pos += 1;
            }
            // Every line up to the next `***` marker belongs to a chunk, as in Codex: a blank or
            // whitespace-only line, even right after the header, is a context line.
            let mut chunks = Vec::new();
            while let Some(line) = self.peek() {
                if line.starts_with("***") {
                    break;
                }
                chunks.push(self.chunk(chunks.is_empty())?);
            }
            if chunks.is_empty() {
                return Err(hunk_err(
                    header_line,
                    format!("Update file hunk for path '{path}' is empty"),
                ));
            }
            return Ok(Hunk::Update {
                path,
                move_to,
                chunks,
            });
        }
        Err(hunk_err(
            self.line_no(),
            format!(
                "'{header}' is not a valid hunk header. Valid hunk headers: '*** Add File: {{path}}', \
                 '*** Delete File: {{path}}', '*** Update File: {{path}}'"
            ),
        ))
    }

    /// `@@` (no anchor) or `@@ text`; the anchor's trailing whitespace is dropped, as Codex does.
    fn anchor(line: &str) -> Option<Option<&str>> {
        if line.trim_end() == "@@" {
            Some(None)
        } else {
            line.strip_prefix("@@ ").map(|text| Some(text.trim_end()))
        }
    }

    fn chunk(&mut self, first: bool) -> Result<Chunk, ParseError> {
        let mut chunk = Chunk {
            patch_line: self.line_no(),
            ..Chunk::default()
        };
        let mut saw_marker = false;
        while let Some(marker) = self.peek().and_then(Self::anchor) {
            saw_marker = true;
            if let Some(text) = marker {
                chunk.anchors.push(text.to_string());
            }
            self.pos += 1;
        }
        if !saw_marker && !first {
            let line = self.peek().unwrap_or_default();
            return Err(hunk_err(
                self.line_no(),
                format!("Expected update hunk to start with a @@ context marker, got: '{line}'"),
            ));
        }
        let start_line = self.line_no();
        while let Some(line) = self.peek() {
            if line.trim() == EOF_MARK {
                chunk.end_of_file = true;
                self.pos += 1;
                // Codex skips blank and whitespace-only lines after the marker (nowhere else).
                while self.peek().is_some_and(|l| l.trim().is_empty()) {
                    self.pos += 1;
                }
                break;
            }
            let parsed = match line.chars().next() {
                None => ChunkLine::Context(String::new()),
                Some(' ') => ChunkLine::Context(line[1..].to_string()),
                Some('-') => ChunkLine::Delete(line[1..].to_string()),
                Some('+') => ChunkLine::Insert(line[1..].to_string()),
                Some(_) if chunk.lines.is_empty() => {
                    return Err(hunk_err(
                        self.line_no(),
                        format!(
                        "Unexpected line found in update hunk: '{line}'. Every line should start \
                             with ' ' (context line), '+' (added line), or '-' (removed line)"
                    ),
                    ))
                }
                Some(_) => break,
            };
            chunk.lines.push(parsed);
            self.pos += 1;
        }
        if chunk.lines.is_empty() {
            return Err(hunk_err(
                start_line,
                "Update hunk does not contain any lines",
            ));
        }
        Ok(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(s: &str) -> ChunkLine {
        ChunkLine::Context(s.into())
    }
    fn del(s: &str) -> ChunkLine {
        ChunkLine::Delete(s.into())
    }
    fn ins(s: &str) -> ChunkLine {
        ChunkLine::Insert(s.into())
    }

    #[test]
    fn every_grammar_element() {
        let patch = "*** Begin Patch\n\
            *** Add File: new.txt\n+one\n+\n+three\n\
            *** Delete File: gone.txt\n\
            *** Update File: src/a.py\n*** Move to: src/b.py\n\
            @@ class A\n@@ def f():\n ctx\n-old\n+new\n\n\
            @@\n-tail\n+TAIL\n*** End of File\n\
            *** End Patch\n";
        let hunks = parse_patch(patch).unwrap();
        assert_eq!(hunks.len(), 3);
        assert_eq!(
            hunks[0],
            Hunk::Add {
                path: "new.txt".into(),
                contents: "one\n\nthree\n".into()
            }
        );
        assert_eq!(
            hunks[1],
            Hunk::Delete {
                path: "gone.txt".into()
            }
        );
        let Hunk::Update {
            path,
            move_to,
            chunks,
        } = &hunks[2]
        else {
            panic!("expected update")
        };
        assert_eq!(path, "src/a.py");
        assert_eq!(move_to.as_deref(), Some("src/b.py"));
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].anchors, vec!["class A", "def f():"]);
        // The empty line inside the chunk is an empty context line.
        assert_eq!(
            chunks[0].lines,
            vec![ctx("ctx"), del("old"), ins("new"), ctx("")]
        );
        assert!(!chunks[0].end_of_file);
        assert_eq!(chunks[1].lines, vec![del("tail"), ins("TAIL")]);
        assert!(chunks[1].end_of_file);
        assert_eq!(chunks[0].old_lines(), vec!["ctx", "old", ""]);
    }

    #[test]
    fn first_chunk_may_omit_marker_and_markers_may_be_padded() {
        let patch = "  *** Begin Patch \n  *** Update File: f \n-a\n+b\n *** End Patch  ";
        let hunks = parse_patch(patch).unwrap();
        let Hunk::Update { path, chunks, .. } = &hunks[0] else {
            panic!()
        };
        assert_eq!(path, "f");
        assert_eq!(chunks[0].lines, vec![del("a"), ins("b")]);
    }

    #[test]
    fn heredoc_wrapper_and_crlf_patch() {
        let patch = "<<'EOF'\r\n*** Begin Patch\r\n*** Delete File: x\r\n*** End Patch\r\nEOF\r\n";
        assert_eq!(
            parse_patch(patch).unwrap(),
            vec![Hunk::Delete { path: "x".into() }]
        );
    }

    #[test]
    fn empty_patch_parses_to_nothing() {
        assert!(parse_patch("*** Begin Patch\n*** End Patch")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn malformed_patches() {
        let err = |p: &str| parse_patch(p).unwrap_err().to_string();
        assert!(err("").contains("first line of the patch must be"));
        assert!(err("*** Update File: x\n-a\n*** End Patch").contains("first line"));
        assert!(err("*** Begin Patch\n*** Delete File: x\n").contains("last line"));
        assert!(err("*** Begin Patch").contains("last line"));
        let e = err("*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch");
        assert!(
            e.contains("line 2") && e.contains("not a valid hunk header"),
            "{e}"
        );
        let e = err("*** Begin Patch\n*** Update File: foo\n*** End Patch");
        assert!(
            e.contains("Update file hunk for path 'foo' is empty"),
            "{e}"
        );
        let e = err("*** Begin Patch\n*** Update File: foo\n@@\n*** End Patch");
        assert!(e.contains("does not contain any lines"), "{e}");
        let e = err("*** Begin Patch\n*** Update File: foo\n@@\n-a\nbogus\n*** End Patch");
        assert!(e.contains("Expected update hunk to start with a @@"), "{e}");
        let e = err("*** Begin Patch\n*** Update File: foo\nbogus\n*** End Patch");
        assert!(e.contains("Unexpected line found in update hunk"), "{e}");
        let e = err("*** Begin Patch\n*** Add File:   \n+x\n*** End Patch");
        assert!(e.contains("file path is missing"), "{e}");
    }
}
