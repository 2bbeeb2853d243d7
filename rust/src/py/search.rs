//! Bindings for grep and glob: the search runs with the GIL released; results stay in Rust and
//! are turned into Python objects only for the page a caller asks for.

use std::time::UNIX_EPOCH;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::errors::{confine_err, raise};
use super::files::PyConfinement;
use crate::search::glob::{self as globbing, GlobOutcome, GlobSort};
use crate::search::grep::{Grep, GrepOptions, GrepOutcome, OutputMode, Row, RowKind};
use crate::search::index as search_index;
use crate::search::render;
use crate::search::walker::{WalkOptions, Walker};
use crate::search::{SearchError, SkipStats};

fn search_err(py: Python<'_>, e: SearchError) -> PyErr {
    match e {
        SearchError::Confine(c) => confine_err(py, c),
        other => raise(py, "ToolArgumentError", other.to_string()),
    }
}

fn stats_dict<'py>(py: Python<'py>, s: &SkipStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("files", s.files)?;
    d.set_item("ignored", s.ignored)?;
    d.set_item("hidden", s.hidden)?;
    d.set_item("binary", s.binary)?;
    d.set_item("outside_roots", s.outside_roots)?;
    d.set_item("errors", s.errors)?;
    d.set_item("first_errors", s.first_errors.clone())?;
    Ok(d)
}

fn kind_name(kind: RowKind) -> &'static str {
    match kind {
        RowKind::Match => "match",
        RowKind::Context => "context",
        RowKind::Break => "break",
        RowKind::File => "file",
        RowKind::Count => "count",
    }
}

fn row_dict<'py>(py: Python<'py>, path: &str, row: &Row) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("kind", kind_name(row.kind))?;
    if row.kind != RowKind::Break {
        d.set_item("path", path)?;
    }
    match row.kind {
        RowKind::Match | RowKind::Context => {
            d.set_item("line", row.line)?;
            d.set_item("byte_offset", row.byte_offset)?;
            d.set_item("text", &row.text)?;
            d.set_item("submatches", row.submatches.clone())?;
            d.set_item("truncated", row.truncated)?;
        }
        RowKind::File | RowKind::Count => d.set_item("count", row.count)?,
        RowKind::Break => {}
    }
    Ok(d)
}

/// The outcome of one grep: counts, skip statistics and the rows, paged on demand.
#[pyclass(frozen, name = "GrepResult", module = "toolroute._core")]
pub struct PyGrepResult {
    grep: Grep,
    outcome: GrepOutcome,
    follow: bool,
}

impl PyGrepResult {
    fn rows_list<'py>(
        &self,
        py: Python<'py>,
        rows: &[(usize, Row)],
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for (index, row) in rows {
            list.append(row_dict(py, &self.outcome.files[*index].display, row)?)?;
        }
        Ok(list)
    }
}

#[pymethods]
impl PyGrepResult {
    /// Rows in output order: lines (and `--` breaks) in content mode, files otherwise.
    #[getter]
    fn total(&self) -> usize {
        self.outcome.total_rows()
    }

    #[getter]
    fn files_matched(&self) -> usize {
        self.outcome.files.len()
    }

    #[getter]
    fn match_lines(&self) -> u64 {
        self.outcome.match_lines()
    }

    #[getter]
    fn output_mode(&self) -> &'static str {
        match self.grep.options().mode {
            OutputMode::Content => "content",
            OutputMode::FilesWithMatches => "files_with_matches",
            OutputMode::Count => "count",
        }
    }

    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.outcome.stats)
    }

    /// Paths of the files with matches, sorted.
    fn paths(&self) -> Vec<String> {
        self.outcome
            .files
            .iter()
            .map(|f| f.display.clone())
            .collect()
    }

    /// Structured rows `offset..offset+limit` as dicts (path, kind, line, byte_offset, text,
    /// submatches, truncated; count for file/count rows).
    #[pyo3(signature = (offset=0, limit=None))]
    fn rows<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let rows =
            py.detach(|| render::page(&self.grep, &self.outcome, self.follow, offset, limit));
        self.rows_list(py, &rows)
    }

    /// rg-style text for rows from `offset`, at most `limit` rows and `max_chars` characters;
    /// returns the text and the rows it shows (as dicts).
    #[pyo3(signature = (offset=0, limit=None, max_chars=30_000, max_line_chars=2_000))]
    fn render<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        limit: Option<usize>,
        max_chars: usize,
        max_line_chars: usize,
    ) -> PyResult<(String, Bound<'py, PyList>)> {
        let (text, rows) = py.detach(|| {
            // A row costs at least two characters, so more than max_chars/2 rows never fit.
            let cap = limit.unwrap_or(usize::MAX).min(max_chars / 2 + 1);
            let mut rows = render::page(&self.grep, &self.outcome, self.follow, offset, Some(cap));
            let (text, shown) = render::render(&self.outcome, &rows, max_chars, max_line_chars);
            rows.truncate(shown);
            (text, rows)
        });
        Ok((text, self.rows_list(py, &rows)?))
    }
}

/// Search files under `path` (default: the workspace root) for `pattern`.
#[pyfunction]
#[pyo3(name = "grep", signature = (
    confinement, pattern, path=None, *, globs=Vec::new(), types=Vec::new(),
    case_insensitive=false, fixed_strings=false, word=false, multiline=false,
    before=0, after=0, output_mode="content", max_count=None, hidden=false, no_ignore=false,
    require_git=false, follow_symlinks=false, text=false, max_line_bytes=8192, threads=0,
    index=true
))]
#[allow(clippy::too_many_arguments)]
fn grep_files(
    py: Python<'_>,
    confinement: &Bound<'_, PyConfinement>,
    pattern: &str,
    path: Option<&str>,
    globs: Vec<String>,
    types: Vec<String>,
    case_insensitive: bool,
    fixed_strings: bool,
    word: bool,
    multiline: bool,
    before: usize,
    after: usize,
    output_mode: &str,
    max_count: Option<u64>,
    hidden: bool,
    no_ignore: bool,
    require_git: bool,
    follow_symlinks: bool,
    text: bool,
    max_line_bytes: usize,
    threads: usize,
    index: bool,
) -> PyResult<PyGrepResult> {
    let roots = &confinement.get().roots;
    let mode = OutputMode::parse(output_mode).map_err(|e| search_err(py, e))?;
    let opts = GrepOptions {
        case_insensitive,
        fixed_strings,
        word,
        multiline,
        before,
        after,
        mode,
        max_count,
        text,
        max_line_bytes: max_line_bytes.max(1),
        ..GrepOptions::default()
    };
    let walk = WalkOptions {
        hidden,
        no_ignore,
        require_git,
        globs,
        // As `rg -g` run from the workspace root (see docs/search.md).
        globs_from_workspace: true,
        types,
        follow_symlinks,
        threads,
    };
    py.detach(|| {
        let grep = Grep::new(pattern, opts)?;
        let walker = Walker::new(roots, path, walk)?;
        let outcome = if index {
            search_index::grep(roots, &grep, pattern, &walker, || grep.run(&walker))
        } else {
            grep.run(&walker)
        };
        Ok(PyGrepResult {
            grep,
            outcome,
            follow: follow_symlinks,
        })
    })
    .map_err(|e| search_err(py, e))
}

/// The outcome of one glob: sorted paths, their modification times and skip statistics.
#[pyclass(frozen, name = "GlobResult", module = "toolroute._core")]
pub struct PyGlobResult {
    outcome: GlobOutcome,
}

#[pymethods]
impl PyGlobResult {
    fn __len__(&self) -> usize {
        self.outcome.files.len()
    }

    /// Display paths (workspace-relative when inside the workspace), in the requested order.
    #[pyo3(signature = (offset=0, limit=None))]
    fn paths(&self, offset: usize, limit: Option<usize>) -> Vec<String> {
        let files = self.outcome.files.iter().skip(offset);
        files
            .take(limit.unwrap_or(usize::MAX))
            .map(|f| f.display.clone())
            .collect()
    }

    /// Modification times (seconds since the epoch; None when unknown or sorted by path).
    #[pyo3(signature = (offset=0, limit=None))]
    fn modified(&self, offset: usize, limit: Option<usize>) -> Vec<Option<f64>> {
        let files = self.outcome.files.iter().skip(offset);
        files
            .take(limit.unwrap_or(usize::MAX))
            .map(|f| {
                f.modified
                    .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_secs_f64())
            })
            .collect()
    }

    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.outcome.stats)
    }
}

/// List files under `path` matching the gitignore-style `pattern`.
#[pyfunction]
#[pyo3(name = "glob", signature = (
    confinement, pattern, path=None, *, sort="modified", hidden=false, no_ignore=false,
    require_git=false, follow_symlinks=false, threads=0, index=true
))]
#[allow(clippy::too_many_arguments)]
fn glob_files(
    py: Python<'_>,
    confinement: &Bound<'_, PyConfinement>,
    pattern: &str,
    path: Option<&str>,
    sort: &str,
    hidden: bool,
    no_ignore: bool,
    require_git: bool,
    follow_symlinks: bool,
    threads: usize,
    index: bool,
) -> PyResult<PyGlobResult> {
    let roots = &confinement.get().roots;
    let sort = match sort {
        "modified" => GlobSort::Modified,
        "path" => GlobSort::Path,
        other => {
            let e = SearchError::Argument(format!("sort must be modified or path, not {other:?}"));
            return Err(search_err(py, e));
        }
    };
    if pattern.is_empty() {
        return Err(search_err(
            py,
            SearchError::Argument("pattern must not be empty".into()),
        ));
    }
    let walk = WalkOptions {
        hidden,
        no_ignore,
        require_git,
        // The pattern is relative to the folder searched (as Claude Code's Glob).
        globs: vec![pattern.to_string()],
        globs_from_workspace: false,
        types: Vec::new(),
        follow_symlinks,
        threads,
    };
    py.detach(|| {
        let walker = Walker::new(roots, path, walk)?;
        let scan = || globbing::run(&walker, sort);
        let outcome = if index {
            search_index::glob(roots, &walker, sort, scan)
        } else {
            scan()
        };
        Ok(PyGlobResult { outcome })
    })
    .map_err(|e| search_err(py, e))
}

/// The walker an index for these settings would serve (its start is the root or `path`).
fn index_walker(
    roots: &crate::confine::Roots,
    path: Option<&str>,
    hidden: bool,
    no_ignore: bool,
) -> Result<Walker, SearchError> {
    let walk = WalkOptions {
        hidden,
        no_ignore,
        globs_from_workspace: true,
        ..WalkOptions::default()
    };
    Walker::new(roots, path, walk)
}

/// Build the grep index for the root holding `path` (with these walk settings) now and wait
/// until it is ready; false when it is not ready within `timeout` seconds or cannot be used.
#[pyfunction]
#[pyo3(signature = (confinement, path=None, *, timeout=60.0, hidden=false, no_ignore=false))]
fn search_index_warm(
    py: Python<'_>,
    confinement: &Bound<'_, PyConfinement>,
    path: Option<&str>,
    timeout: f64,
    hidden: bool,
    no_ignore: bool,
) -> PyResult<bool> {
    let roots = &confinement.get().roots;
    py.detach(|| {
        let walker = index_walker(roots, path, hidden, no_ignore)?;
        let wait = std::time::Duration::from_secs_f64(timeout.max(0.0));
        Ok(search_index::warm(roots, &walker, wait))
    })
    .map_err(|e| search_err(py, e))
}

/// What the grep index for the root holding `path` holds: state, files, bytes indexed, memory
/// bytes, dirty files, watched folders, whether it is watching (else checking), queries served,
/// build seconds.
#[pyfunction]
#[pyo3(signature = (confinement, path=None, *, hidden=false, no_ignore=false))]
fn search_index_stats<'py>(
    py: Python<'py>,
    confinement: &Bound<'_, PyConfinement>,
    path: Option<&str>,
    hidden: bool,
    no_ignore: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let roots = &confinement.get().roots;
    let s = py
        .detach(|| index_walker(roots, path, hidden, no_ignore).map(|w| search_index::stats(&w)))
        .map_err(|e| search_err(py, e))?;
    let d = PyDict::new(py);
    d.set_item("state", s.state)?;
    d.set_item("files", s.files)?;
    d.set_item("bytes", s.bytes)?;
    d.set_item("memory", s.memory)?;
    d.set_item("dirty", s.dirty)?;
    d.set_item("watched", s.watched)?;
    d.set_item("watching", s.watching)?;
    d.set_item("served", s.served)?;
    d.set_item("build_seconds", s.build_seconds)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(search_index_warm, m)?)?;
    m.add_function(wrap_pyfunction!(search_index_stats, m)?)?;
    m.add_class::<PyGrepResult>()?;
    m.add_class::<PyGlobResult>()?;
    m.add_function(wrap_pyfunction!(grep_files, m)?)?;
    m.add_function(wrap_pyfunction!(glob_files, m)?)?;
    Ok(())
}
