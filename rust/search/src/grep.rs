//! grep: a parallel search with ripgrep's searcher over the shared walker. Results are collected
//! per file and sorted by path afterwards (the walk itself stays parallel).

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, MmapChoice, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch,
};

use super::walker::{Found, PerFile, Walker};
use super::{Cancel, Cancellable, SearchError, SkipStats};

/// A searcher never buffers more than this per file (a huge line, or a whole file in multiline
/// mode); beyond it the file fails with an error instead of eating memory.
const HEAP_LIMIT: usize = 64 * 1024 * 1024;

/// What grep prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// Matching lines (with context).
    Content,
    /// The paths of files with a match.
    FilesWithMatches,
    /// The number of matching lines per file.
    Count,
}

impl OutputMode {
    /// Read `output_mode` as the tool takes it.
    pub fn parse(name: &str) -> Result<Self, SearchError> {
        match name {
            "content" => Ok(Self::Content),
            "files_with_matches" => Ok(Self::FilesWithMatches),
            "count" => Ok(Self::Count),
            other => Err(SearchError::Argument(format!(
                "output_mode must be content, files_with_matches or count, not {other:?}"
            ))),
        }
    }
}

/// How grep matches and what it keeps.
#[derive(Debug, Clone)]
pub struct GrepOptions {
    /// Ignore case (rg -i).
    pub case_insensitive: bool,
    /// The pattern is a literal string (rg -F).
    pub fixed_strings: bool,
    /// Match whole words only (rg -w).
    pub word: bool,
    /// Patterns may span lines, and `.` matches a newline (rg -U --multiline-dotall).
    pub multiline: bool,
    /// Context lines before each match (rg -B).
    pub before: usize,
    /// Context lines after each match (rg -A).
    pub after: usize,
    /// What to print.
    pub mode: OutputMode,
    /// Matches per file (rg -m).
    pub max_count: Option<u64>,
    /// Search binary files as text (rg -a) instead of skipping them.
    pub text: bool,
    /// Stored line text is cut at this many bytes (spans still refer to the whole line).
    pub max_line_bytes: usize,
    /// Total bytes of rows kept from the parallel pass; files past it keep only their counts and
    /// are searched again if a page needs them. A page is cut at the output cap (tens of KB),
    /// so a few MB cover it; keeping every row of a dense search cost more than the search.
    pub store_budget: usize,
}

impl Default for GrepOptions {
    fn default() -> Self {
        Self {
            case_insensitive: false,
            fixed_strings: false,
            word: false,
            multiline: false,
            before: 0,
            after: 0,
            mode: OutputMode::Content,
            max_count: None,
            text: false,
            max_line_bytes: 8 * 1024,
            store_budget: 1024 * 1024,
        }
    }
}

/// What a row of grep's output is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// A matching line.
    Match,
    /// A context line.
    Context,
    /// `--` between non-adjacent groups of context.
    Break,
    /// files_with_matches: one per file.
    File,
    /// count: one per file, with `count`.
    Count,
}

/// One row of grep's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// What it is.
    pub kind: RowKind,
    /// 1-based line number (0 for File/Count/Break rows).
    pub line: u64,
    /// Byte offset of the line's start in the file.
    pub byte_offset: u64,
    /// The line without its terminator, lossily decoded, cut at `max_line_bytes`.
    pub text: String,
    /// The text was cut at `max_line_bytes`.
    pub truncated: bool,
    /// Byte spans of each match within the line.
    pub submatches: Vec<(usize, usize)>,
    /// Matching lines (Count rows).
    pub count: u64,
}

impl Row {
    fn bare(kind: RowKind, count: u64) -> Self {
        Self {
            kind,
            line: 0,
            byte_offset: 0,
            text: String::new(),
            truncated: false,
            submatches: Vec::new(),
            count,
        }
    }
}

/// One file's matches.
#[derive(Debug, Clone)]
pub struct FileHits {
    /// Relative to the root the walk was confined to (`GrepOutcome::root`).
    pub path: PathBuf,
    /// The path as output shows it (workspace-relative, or absolute under a read-only root).
    pub display: String,
    /// `None` when the store budget ran out; `Grep::rows` then searches the file again.
    pub rows: Option<Vec<Row>>,
    /// How many rows it has (also when they were not kept).
    pub row_count: usize,
    /// How many of its lines match.
    pub match_lines: u64,
}

/// What a grep found.
#[derive(Debug, Default)]
pub struct GrepOutcome {
    /// Files with at least one match, sorted by path.
    pub files: Vec<FileHits>,
    /// What the walk left out.
    pub stats: SkipStats,
    /// The root the files were found beneath: files whose rows were not kept are opened again
    /// beneath it.
    pub root: Option<Arc<OwnedFd>>,
}

impl GrepOutcome {
    /// Rows over every file.
    pub fn total_rows(&self) -> usize {
        self.files.iter().map(|f| f.row_count).sum()
    }

    /// Matching lines over every file.
    pub fn match_lines(&self) -> u64 {
        self.files.iter().map(|f| f.match_lines).sum()
    }
}

/// Files with matches found so far, and the bytes of rows still allowed to be kept.
pub(crate) struct Collector {
    found: Mutex<Vec<FileHits>>,
    budget: AtomicUsize,
}

/// A compiled grep: the pattern's matcher and the options, run over a walk.
pub struct Grep {
    /// Shared with the matcher cache, so its match caches stay warm across calls.
    matcher: Arc<RegexMatcher>,
    opts: GrepOptions,
    /// Files searched so far, for a caller that reports progress while the search runs.
    searched: Option<Arc<AtomicU64>>,
    /// Set when the caller gave up: no further file is searched, nor read further.
    cancel: Option<Cancel>,
}

/// What a compiled matcher depends on.
#[derive(Clone, PartialEq, Eq)]
struct MatcherKey {
    pattern: String,
    case_insensitive: bool,
    fixed_strings: bool,
    word: bool,
    multiline: bool,
}

/// Compiled matchers of recent calls, newest last: an agent repeats and refines patterns, and
/// compiling one (Unicode classes especially) costs milliseconds.
const MATCHER_CACHE: usize = 32;
static MATCHERS: Mutex<Vec<(MatcherKey, Arc<RegexMatcher>)>> = Mutex::new(Vec::new());

fn cached_matcher(key: &MatcherKey) -> Option<Arc<RegexMatcher>> {
    let mut cache = MATCHERS.lock().unwrap_or_else(|e| e.into_inner());
    let at = cache.iter().position(|(k, _)| k == key)?;
    let entry = cache.remove(at);
    let matcher = Arc::clone(&entry.1);
    cache.push(entry);
    Some(matcher)
}

fn remember_matcher(key: MatcherKey, matcher: &Arc<RegexMatcher>) {
    let mut cache = MATCHERS.lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= MATCHER_CACHE {
        cache.remove(0);
    }
    cache.push((key, Arc::clone(matcher)));
}

/// Explain an invalid regex with the character position of the mistake.
fn regex_error(pattern: &str, fallback: &str) -> SearchError {
    use regex_syntax::ast::parse::Parser;
    let described = match Parser::new().parse(pattern) {
        Err(e) => Some((e.span().start, e.kind().to_string())),
        Ok(ast) => regex_syntax::hir::translate::Translator::new()
            .translate(pattern, &ast)
            .err()
            .map(|e| (e.span().start, e.kind().to_string())),
    };
    let message = match described {
        Some((pos, kind)) => {
            let column = pattern[..pos.offset].chars().count() + 1;
            format!(
                "invalid regex {pattern:?}: {kind} at position {column} (Rust regex syntax; set fixed_strings=true to search for the text literally)\n    {pattern}\n    {}^",
                " ".repeat(column - 1)
            )
        }
        None => format!("invalid regex {pattern:?}: {fallback}"),
    };
    SearchError::Regex(message)
}

/// Split a match block (one line, or several in multiline mode) into rows.
#[allow(clippy::too_many_arguments)] // one row's worth of facts, and the search's cancel
fn push_lines(
    rows: &mut Vec<Row>,
    kind: RowKind,
    block: &[u8],
    first_line: u64,
    offset: u64,
    spans: &[(usize, usize)],
    max_line_bytes: usize,
    cancel: Option<&Cancel>,
) -> usize {
    let mut bytes = 0;
    let mut start = 0;
    let mut line = first_line;
    // Spans come sorted and apart (find_iter's): each line looks only at those from the first
    // that may still reach it (a multiline block of a whole file has as many spans as lines:
    // scanning all of them for each line made 4 MiB cost 2 s, 40 MiB 191 s).
    let mut first = 0;
    while start < block.len() {
        let end = memchr::memchr(b'\n', &block[start..]).map_or(block.len(), |i| start + i + 1);
        let mut content = &block[start..end];
        if let Some(stripped) = content.strip_suffix(b"\n") {
            content = stripped.strip_suffix(b"\r").unwrap_or(stripped);
        }
        let truncated = content.len() > max_line_bytes;
        let shown = &content[..content.len().min(max_line_bytes)];
        let line_end = start + content.len();
        while spans
            .get(first)
            .is_some_and(|&(s, e)| s < start && e <= start)
        {
            first += 1; // ended before this line: before every later one too
        }
        // A span belongs to this line if it starts in it, or started earlier and runs into it.
        let submatches = spans[first..]
            .iter()
            .take_while(|&&(s, _)| s <= line_end)
            .filter(|&&(s, e)| (s >= start && s <= line_end) || (s < start && e > start))
            .map(|&(s, e)| {
                (
                    s.max(start) - start,
                    e.min(line_end).max(s.max(start)) - start,
                )
            })
            .collect();
        let text = String::from_utf8_lossy(shown).into_owned();
        bytes += text.len() + 64;
        rows.push(Row {
            kind,
            line,
            byte_offset: offset + start as u64,
            text,
            truncated,
            submatches,
            count: 0,
        });
        start = end;
        line += 1;
        if line % 4096 == 0 && cancel.is_some_and(Cancel::is_cancelled) {
            break; // (the caller reports the file's search as cancelled)
        }
    }
    bytes
}

struct Collect<'a> {
    matcher: &'a RegexMatcher,
    opts: &'a GrepOptions,
    /// A search over a slice (a multiline search reads its file whole first) never reads
    /// again: between its matches is where it learns it was cancelled.
    cancel: Option<&'a Cancel>,
    store: bool,
    rows: Vec<Row>,
    row_count: usize,
    match_lines: u64,
    bytes: usize,
    binary: bool,
}

impl Collect<'_> {
    /// An error (the file's search failed: cancelled) once the caller gave up.
    fn go_on(&self) -> io::Result<()> {
        match self.cancel {
            Some(cancel) if cancel.is_cancelled() => {
                Err(io::Error::other("the search was cancelled"))
            }
            _ => Ok(()),
        }
    }

    fn lines_in(block: &[u8]) -> usize {
        let n = memchr::memchr_iter(b'\n', block).count();
        if block.last() == Some(&b'\n') {
            n.max(1)
        } else {
            n + 1
        }
    }
}

impl Collector {
    /// Files with matches a worker found (held by the worker, so threads do not take turns at
    /// the lock for every file).
    pub(crate) fn add(&self, hits: Vec<FileHits>) {
        self.found
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(hits);
    }
}

/// The matcher, told of its search's cancel: each match attempt asks first, so a search that
/// neither reads again nor reaches its sink (a multiline search merges its adjacent matches
/// into one block, handed over at the very end) still stops within one attempt.
struct Stoppable<'a> {
    inner: &'a RegexMatcher,
    cancel: &'a Cancel,
}

impl Stoppable<'_> {
    fn go_on(&self) -> io::Result<()> {
        if self.cancel.is_cancelled() {
            return Err(io::Error::other("the search was cancelled"));
        }
        Ok(())
    }
}

fn never<E: std::fmt::Display>(err: E) -> io::Error {
    io::Error::other(err.to_string())
}

impl Matcher for Stoppable<'_> {
    type Captures = <RegexMatcher as Matcher>::Captures;
    type Error = io::Error;

    fn find_at(&self, haystack: &[u8], at: usize) -> io::Result<Option<grep_matcher::Match>> {
        self.go_on()?;
        self.inner.find_at(haystack, at).map_err(never)
    }

    fn new_captures(&self) -> io::Result<Self::Captures> {
        self.inner.new_captures().map_err(never)
    }

    fn capture_count(&self) -> usize {
        self.inner.capture_count()
    }

    fn capture_index(&self, name: &str) -> Option<usize> {
        self.inner.capture_index(name)
    }

    fn captures_at(
        &self,
        haystack: &[u8],
        at: usize,
        caps: &mut Self::Captures,
    ) -> io::Result<bool> {
        self.go_on()?;
        self.inner.captures_at(haystack, at, caps).map_err(never)
    }

    fn is_match_at(&self, haystack: &[u8], at: usize) -> io::Result<bool> {
        self.go_on()?;
        self.inner.is_match_at(haystack, at).map_err(never)
    }

    fn shortest_match_at(&self, haystack: &[u8], at: usize) -> io::Result<Option<usize>> {
        self.go_on()?;
        self.inner.shortest_match_at(haystack, at).map_err(never)
    }

    fn non_matching_bytes(&self) -> Option<&grep_matcher::ByteSet> {
        self.inner.non_matching_bytes()
    }

    fn line_terminator(&self) -> Option<grep_matcher::LineTerminator> {
        self.inner.line_terminator()
    }

    fn find_candidate_line(
        &self,
        haystack: &[u8],
    ) -> io::Result<Option<grep_matcher::LineMatchKind>> {
        self.go_on()?;
        self.inner.find_candidate_line(haystack).map_err(never)
    }
}

impl Sink for Collect<'_> {
    type Error = io::Error;

    fn matched(&mut self, _s: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.go_on()?;
        let block = m.bytes();
        // Without multiline, a match is one line.
        let lines = if self.opts.multiline {
            Self::lines_in(block)
        } else {
            1
        };
        self.match_lines += lines as u64;
        match self.opts.mode {
            OutputMode::FilesWithMatches => {
                self.row_count = 1;
                return Ok(false);
            }
            OutputMode::Count => {
                self.row_count = 1;
            }
            OutputMode::Content => {
                self.row_count += lines;
                if self.store {
                    let mut spans = Vec::new();
                    let cancel = self.cancel;
                    self.matcher
                        .find_iter(block, |found| {
                            spans.push((found.start(), found.end()));
                            // (a multiline block can be the whole file: its spans as long to find)
                            !cancel.is_some_and(Cancel::is_cancelled)
                        })
                        .map_err(|e| io::Error::other(e.to_string()))?;
                    self.go_on()?;
                    self.bytes += push_lines(
                        &mut self.rows,
                        RowKind::Match,
                        block,
                        m.line_number().unwrap_or(0),
                        m.absolute_byte_offset(),
                        &spans,
                        self.opts.max_line_bytes,
                        self.cancel,
                    );
                    self.go_on()?;
                }
            }
        }
        Ok(true)
    }

    fn context(&mut self, _s: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        self.go_on()?;
        if self.opts.mode == OutputMode::Content {
            self.row_count += 1;
            if self.store {
                self.bytes += push_lines(
                    &mut self.rows,
                    RowKind::Context,
                    c.bytes(),
                    c.line_number().unwrap_or(0),
                    c.absolute_byte_offset(),
                    &[],
                    self.opts.max_line_bytes,
                    self.cancel,
                );
            }
        }
        Ok(true)
    }

    fn context_break(&mut self, _s: &Searcher) -> Result<bool, io::Error> {
        if self.opts.mode == OutputMode::Content && self.row_count > 0 {
            self.row_count += 1;
            if self.store {
                self.rows.push(Row::bare(RowKind::Break, 0));
            }
        }
        Ok(true)
    }

    fn binary_data(&mut self, _s: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A worker's searcher and matcher (`Grep::scanner`).
pub(crate) struct Scanner {
    /// Made when first needed, by [`Grep::searcher`]: index `binary + 2 * numbered`.
    searchers: [Option<Searcher>; 4],
    matcher: RegexMatcher,
}

/// What one file's search reads: the open file, or its whole text already in memory.
pub(crate) enum Source<'a> {
    File(File),
    /// A file read through its search's cancel (`search_file` without memory maps reads it
    /// the same way).
    Reader(Cancellable<File>),
    Bytes(&'a [u8]),
    /// A text known to hold no NUL and no byte order mark (`index::texts::keepable`).
    Text(&'a [u8]),
}

fn search<M: Matcher>(
    searcher: &mut Searcher,
    matcher: &M,
    source: Source<'_>,
    sink: &mut Collect<'_>,
) -> io::Result<()> {
    match source {
        Source::File(file) => searcher.search_file(matcher, &file, sink),
        Source::Reader(reader) => searcher.search_reader(matcher, reader, sink),
        // A slice is checked for binary data only near its start; the reader path checks all
        // of it, as reading the file does.
        Source::Bytes(text) if memchr::memchr(0, text).is_none() => {
            searcher.search_slice(matcher, text, sink)
        }
        Source::Bytes(text) => searcher.search_reader(matcher, text, sink),
        Source::Text(text) => searcher.search_slice(matcher, text, sink),
    }
}

struct Scan {
    rows: Option<Vec<Row>>,
    row_count: usize,
    match_lines: u64,
    bytes: usize,
    binary: bool,
}

fn compile(pattern: &str, opts: &GrepOptions) -> Result<RegexMatcher, SearchError> {
    let mut b = RegexMatcherBuilder::new();
    b.case_insensitive(opts.case_insensitive)
        .fixed_strings(opts.fixed_strings)
        .word(opts.word);
    if opts.multiline {
        b.multi_line(true).dot_matches_new_line(true);
    } else {
        b.line_terminator(Some(b'\n'));
    }
    b.build(pattern).map_err(|e| {
        let text = e.to_string();
        if text.contains("line terminator") || text.contains("literal \"\\n\"") {
            SearchError::Regex(format!(
                "pattern {pattern:?} can match a line break; set multiline=true to search across lines"
            ))
        } else {
            regex_error(pattern, &text)
        }
    })
}

impl Grep {
    /// Compile `pattern` with `opts` (matchers are cached across calls).
    pub fn new(pattern: &str, opts: GrepOptions) -> Result<Self, SearchError> {
        if pattern.is_empty() {
            return Err(SearchError::Argument("pattern must not be empty".into()));
        }
        let key = MatcherKey {
            pattern: pattern.to_string(),
            case_insensitive: opts.case_insensitive,
            fixed_strings: opts.fixed_strings,
            word: opts.word,
            multiline: opts.multiline,
        };
        let matcher = match cached_matcher(&key) {
            Some(matcher) => matcher,
            None => {
                let matcher = Arc::new(compile(pattern, &opts)?);
                remember_matcher(key, &matcher);
                matcher
            }
        };
        Ok(Self {
            matcher,
            opts,
            searched: None,
            cancel: None,
        })
    }

    /// Stop searching once `cancel` is set: files not begun are skipped, and a file being
    /// read fails at its next read (what was found so far is kept).
    pub fn cancelled_by(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Count each file searched into `counter` as the search goes (read from another thread).
    pub fn counting_into(mut self, counter: Arc<AtomicU64>) -> Self {
        self.searched = Some(counter);
        self
    }

    /// Whether files searched are counted for a progress report.
    pub fn counts_progress(&self) -> bool {
        self.searched.is_some()
    }

    /// The options it was compiled with.
    pub fn options(&self) -> &GrepOptions {
        &self.opts
    }

    /// What one worker thread searches with: its own searcher, and its own copy of the matcher
    /// (a copy has its own scratch pool; threads sharing one take turns at its lock).
    pub(crate) fn scanner(&self) -> Scanner {
        Scanner {
            searchers: [None, None, None, None],
            matcher: RegexMatcher::clone(&self.matcher),
        }
    }

    /// `binary`: look for binary data and byte order marks (a text known to have neither is not
    /// scanned for them). `numbered`: count lines (only rows kept show line numbers, and
    /// counting them costs on dense matches; a file whose rows are not kept is searched again,
    /// numbered, if a page shows it).
    fn searcher(&self, binary: bool, numbered: bool) -> Searcher {
        let o = &self.opts;
        let mut b = SearcherBuilder::new();
        b.line_number(numbered)
            .bom_sniffing(binary)
            .multi_line(o.multiline)
            .memory_map(MmapChoice::never())
            .heap_limit(Some(HEAP_LIMIT))
            .max_matches(o.max_count)
            .binary_detection(if o.text || !binary {
                BinaryDetection::none()
            } else {
                BinaryDetection::quit(b'\x00')
            });
        if o.mode == OutputMode::Content {
            b.before_context(o.before).after_context(o.after);
        }
        b.build()
    }

    fn scan(&self, scanner: &mut Scanner, source: Source<'_>, store: bool) -> io::Result<Scan> {
        let Scanner { searchers, matcher } = scanner;
        let matcher = &*matcher;
        let numbered = self.opts.mode == OutputMode::Content && store;
        let binary = !matches!(source, Source::Text(_));
        let searcher = searchers[usize::from(binary) + 2 * usize::from(numbered)]
            .get_or_insert_with(|| self.searcher(binary, numbered));
        let mut sink = Collect {
            matcher,
            opts: &self.opts,
            cancel: self.cancel.as_ref(),
            store,
            rows: Vec::new(),
            row_count: 0,
            match_lines: 0,
            bytes: 0,
            binary: false,
        };
        match &self.cancel {
            None => search(searcher, matcher, source, &mut sink)?,
            Some(cancel) => {
                // The same search, stopping at the next read or match attempt once cancelled.
                let matcher = Stoppable {
                    inner: matcher,
                    cancel,
                };
                let source = match source {
                    Source::File(inner) => Source::Reader(Cancellable {
                        inner,
                        cancel: cancel.clone(),
                    }),
                    other => other,
                };
                search(searcher, &matcher, source, &mut sink)?
            }
        }
        Ok(Scan {
            rows: store.then_some(sink.rows),
            row_count: sink.row_count,
            match_lines: sink.match_lines,
            bytes: sink.bytes,
            binary: sink.binary,
        })
    }

    /// Search everything the walker yields; results sorted by path.
    pub fn run(&self, walker: &Walker) -> GrepOutcome {
        let collector = self.collector();
        let stats = walker.walk(PerFile::Costly, || {
            let mut scanner = self.scanner();
            let collector = &collector;
            move |dent: &Found<'_>, stats: &mut SkipStats| {
                let name = |path: bool| {
                    let rel = if path {
                        dent.root_relative()
                    } else {
                        PathBuf::new()
                    };
                    (rel, dent.display())
                };
                let opened = dent.open().map(Source::File);
                self.visit(&mut scanner, opened, &name, stats, collector, None);
            }
        });
        self.finish(collector, stats, walker.root())
    }

    pub(crate) fn collector(&self) -> Collector {
        Collector {
            found: Mutex::new(Vec::new()),
            budget: AtomicUsize::new(self.opts.store_budget),
        }
    }

    /// Search one file the walk (or the search index) selected, counting it in `stats`; `name`
    /// gives how it is shown and, when asked (`true`), its root-relative path; it is called only
    /// for a file with matches or an error.
    pub(crate) fn visit(
        &self,
        scanner: &mut Scanner,
        opened: io::Result<Source<'_>>,
        name: &dyn Fn(bool) -> (PathBuf, String),
        stats: &mut SkipStats,
        collector: &Collector,
        held: Option<&mut Vec<FileHits>>,
    ) {
        if self.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
            return;
        }
        stats.files += 1;
        if let Some(searched) = &self.searched {
            searched.fetch_add(1, Ordering::Relaxed);
        }
        let budget = &collector.budget;
        let store = self.opts.mode != OutputMode::Content || budget.load(Ordering::Relaxed) > 0;
        let scan = opened.and_then(|source| self.scan(scanner, source, store));
        match scan {
            Ok(scan) => {
                if scan.binary {
                    stats.binary += 1;
                }
                // rg -c leaves out a file whose search stopped at binary data.
                let binary_count = scan.binary && self.opts.mode == OutputMode::Count;
                if scan.row_count == 0 || binary_count {
                    return;
                }
                if scan.bytes > 0 {
                    let _ = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                        Some(b.saturating_sub(scan.bytes))
                    });
                }
                // The path is kept only to search the file again for rows not kept.
                let (path, display) = name(scan.rows.is_none());
                let hits = FileHits {
                    path,
                    display,
                    rows: scan.rows,
                    row_count: scan.row_count,
                    match_lines: scan.match_lines,
                };
                match held {
                    Some(held) => held.push(hits),
                    None => collector.add(vec![hits]),
                }
            }
            Err(err) => {
                stats.errors += 1;
                if stats.first_errors.len() < 5 {
                    stats.first_errors.push(format!("{}: {err}", name(false).1));
                }
            }
        }
    }

    /// The outcome: files sorted by path.
    pub(crate) fn finish(
        &self,
        collector: Collector,
        stats: SkipStats,
        root: Arc<OwnedFd>,
    ) -> GrepOutcome {
        let mut files = collector
            .found
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        // Already in order when the index gave the files in path order: checking costs less
        // than sorting.
        let order = |a: &FileHits, b: &FileHits| {
            super::bytes_order(a.display.as_bytes(), b.display.as_bytes())
        };
        if !files.is_sorted_by(|a, b| order(a, b).is_le()) {
            files.sort_unstable_by(order);
        }
        GrepOutcome {
            files,
            stats,
            root: Some(root),
        }
    }

    /// The rows of one file: the stored ones, or searched again (the same search, so the same
    /// rows, unless the file changed in between).
    pub fn rows(&self, outcome: &GrepOutcome, hits: &FileHits, follow: bool) -> Vec<Row> {
        let rows = match (&hits.rows, &outcome.root) {
            (Some(rows), _) => rows.clone(),
            (None, Some(root)) => {
                let mut scanner = self.scanner();
                Walker::reopen(root, &hits.path, follow)
                    .and_then(|file| self.scan(&mut scanner, Source::File(file), true))
                    .ok()
                    .and_then(|scan| scan.rows)
                    .unwrap_or_default()
            }
            (None, None) => Vec::new(),
        };
        match self.opts.mode {
            OutputMode::Content => rows,
            OutputMode::FilesWithMatches => vec![Row::bare(RowKind::File, hits.match_lines)],
            OutputMode::Count => vec![Row::bare(RowKind::Count, hits.match_lines)],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `push_lines` gave each line before it walked the spans once: every span tested
    /// against every line.
    fn naive_submatches(block: &[u8], spans: &[(usize, usize)]) -> Vec<Vec<(usize, usize)>> {
        let mut out = Vec::new();
        let mut start = 0;
        while start < block.len() {
            let end = memchr::memchr(b'\n', &block[start..]).map_or(block.len(), |i| start + i + 1);
            let line_end = start
                + block[start..end]
                    .strip_suffix(b"\n")
                    .map_or(end - start, <[u8]>::len);
            out.push(
                spans
                    .iter()
                    .filter(|&&(s, e)| (s >= start && s <= line_end) || (s < start && e > start))
                    .map(|&(s, e)| {
                        (
                            s.max(start) - start,
                            e.min(line_end).max(s.max(start)) - start,
                        )
                    })
                    .collect(),
            );
            start = end;
        }
        out
    }

    #[test]
    fn rows_get_the_same_submatches_as_every_span_tested_against_every_line() {
        // Blocks of short and long lines, matches within lines, across lines, empty ones.
        let block = b"ab\n\ncdef\ngh ij kl\n\n\nmnopqrstu\nv\nwxyz".repeat(37);
        let matcher = RegexMatcherBuilder::new()
            .multi_line(true)
            .build(r"(?s)b\n\nc|f\ng|[ij]| |o.*?\n.|\n\n|z|(?m)^")
            .unwrap();
        let mut spans = Vec::new();
        matcher
            .find_iter(&block, |m| {
                spans.push((m.start(), m.end()));
                true
            })
            .unwrap();
        assert!(spans.len() > 100);
        let mut rows = Vec::new();
        push_lines(
            &mut rows,
            RowKind::Match,
            &block,
            1,
            0,
            &spans,
            1 << 20,
            None,
        );
        let got: Vec<_> = rows.iter().map(|r| r.submatches.clone()).collect();
        assert_eq!(got, naive_submatches(&block, &spans));
    }

    #[test]
    fn a_search_over_a_slice_stops_at_its_next_match_once_cancelled() {
        // A multiline search (or the index's texts) searches a slice read whole: no read is
        // left to fail, so its sink refuses to go on.
        let text = b"alpha\nneedle one\nneedle two\n".repeat(1000);
        for multiline in [false, true] {
            let opts = GrepOptions {
                multiline,
                ..GrepOptions::default()
            };
            let cancel = Cancel::new();
            let grep = Grep::new("needle", opts)
                .unwrap()
                .cancelled_by(cancel.clone());
            let mut scanner = grep.scanner();
            let whole = grep.scan(&mut scanner, Source::Text(&text), true).unwrap();
            assert_eq!(whole.row_count, 2000);
            cancel.cancel();
            let stopped = grep.scan(&mut scanner, Source::Text(&text), true);
            assert!(
                stopped.is_err_and(|e| e.to_string().contains("cancelled")),
                "multiline={multiline}"
            );
        }
    }
}
