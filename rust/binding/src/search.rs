//! Bindings for grep and glob: the search runs with the GIL released; results stay in Rust and
//! are turned into Python objects only for the page a caller asks for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::{argument, guard};
use crate::files::PyConfinement;
use toolroute_search::glob::{self as globbing, GlobOutcome, GlobSort};
use toolroute_search::grep::{Grep, GrepOptions, GrepOutcome, OutputMode, Row, RowKind};
use toolroute_search::index as search_index;
use toolroute_search::render;
use toolroute_search::walker::{WalkOptions, Walker};
use toolroute_search::{Cancel, SearchError, SkipStats};

/// One attribute of a request object, as Rust takes it.
fn attr<T>(request: &Borrowed<'_, '_, PyAny>, name: &str) -> PyResult<T>
where
    T: for<'a, 'py> FromPyObject<'a, 'py>,
{
    request.getattr(name)?.extract().map_err(Into::into)
}

/// A grep request as the search crate takes it: `GrepRequest` (`builtins/grep.py`) declares the
/// options once, with their defaults, aliases and limits; each attribute read here goes straight
/// into the crate's own `GrepOptions` or `WalkOptions` (no third declaration in between).
struct GrepCall {
    pattern: String,
    path: Option<String>,
    output_mode: String,
    grep: GrepOptions,
    walk: WalkOptions,
}

impl<'a, 'py> FromPyObject<'a, 'py> for GrepCall {
    type Error = PyErr;

    fn extract(r: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Self {
            pattern: attr(&r, "pattern")?,
            path: attr(&r, "path")?,
            output_mode: attr(&r, "output_mode")?,
            grep: GrepOptions {
                case_insensitive: attr(&r, "case_insensitive")?,
                fixed_strings: attr(&r, "fixed_strings")?,
                word: attr(&r, "word")?,
                multiline: attr(&r, "multiline")?,
                before: attr(&r, "before_lines")?,
                after: attr(&r, "after_lines")?,
                max_count: attr(&r, "max_count")?,
                text: attr(&r, "text")?,
                ..GrepOptions::default()
            },
            walk: WalkOptions {
                hidden: attr(&r, "hidden")?,
                no_ignore: attr(&r, "no_ignore")?,
                globs: attr(&r, "globs")?,
                // As `rg -g` run from the workspace root (see docs/search.md).
                globs_from_workspace: true,
                types: attr(&r, "types")?,
                follow_symlinks: attr(&r, "follow_symlinks")?,
                ..WalkOptions::default()
            },
        })
    }
}

/// A glob request as the search crate takes it, read from `GlobRequest` (`builtins/glob.py`)
/// the same way.
struct GlobCall {
    pattern: String,
    path: Option<String>,
    sort: String,
    walk: WalkOptions,
}

impl<'a, 'py> FromPyObject<'a, 'py> for GlobCall {
    type Error = PyErr;

    fn extract(r: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Self {
            pattern: attr(&r, "pattern")?,
            path: attr(&r, "path")?,
            sort: attr(&r, "sort")?,
            walk: WalkOptions {
                hidden: attr(&r, "hidden")?,
                no_ignore: attr(&r, "no_ignore")?,
                // The pattern is relative to the folder searched (as Claude Code's Glob).
                globs_from_workspace: false,
                follow_symlinks: attr(&r, "follow_symlinks")?,
                ..WalkOptions::default()
            },
        })
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

/// How many files a running grep has searched, read from another thread (progress reports).
#[pyclass(frozen, name = "GrepProgress", module = "toolroute._core")]
#[derive(Default)]
pub struct PyGrepProgress {
    searched: Arc<AtomicU64>,
}

#[pymethods]
impl PyGrepProgress {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Files searched so far.
    #[getter]
    fn files(&self) -> u64 {
        self.searched.load(Ordering::Relaxed)
    }
}

/// A search's cancel switch, set from another thread (the call's cancel token): the search
/// stops before its next file and at its next read of a file.
#[pyclass(frozen, name = "CancelFlag", module = "toolroute._core")]
#[derive(Default)]
pub struct PyCancelFlag {
    cancel: Cancel,
}

#[pymethods]
impl PyCancelFlag {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Stop every search this flag was given to.
    fn cancel(&self) {
        self.cancel.cancel();
    }

    #[getter]
    fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
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
    fn total(&self) -> PyResult<usize> {
        guard(|| Ok(self.outcome.total_rows()))
    }

    #[getter]
    fn files_matched(&self) -> usize {
        self.outcome.files.len()
    }

    #[getter]
    fn match_lines(&self) -> PyResult<u64> {
        guard(|| Ok(self.outcome.match_lines()))
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
    fn paths(&self) -> PyResult<Vec<String>> {
        guard(|| {
            Ok(self
                .outcome
                .files
                .iter()
                .map(|f| f.display.clone())
                .collect())
        })
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
        guard(|| {
            let rows =
                py.detach(|| render::page(&self.grep, &self.outcome, self.follow, offset, limit));
            Ok(self.rows_list(py, &rows)?)
        })
    }

    /// rg-style text for rows from `offset`, at most `limit` rows and `max_chars` characters,
    /// lines cut at `max_line_chars` (the caller's limits); returns the text and the rows it
    /// shows (as dicts).
    #[pyo3(signature = (offset, limit, max_chars, max_line_chars))]
    fn render<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        limit: Option<usize>,
        max_chars: usize,
        max_line_chars: usize,
    ) -> PyResult<(String, Bound<'py, PyList>)> {
        guard(|| {
            let (text, rows) = py.detach(|| {
                let rows = render::rows_from(&self.grep, &self.outcome, self.follow, offset, limit);
                render::render(&self.outcome, rows, max_chars, max_line_chars)
            });
            Ok((text, self.rows_list(py, &rows)?))
        })
    }
}

/// Search files under `request.path` (default: the workspace root) for `request.pattern`;
/// lines are read up to `max_line_bytes` (the caller's limit).
#[pyfunction]
#[pyo3(name = "grep", signature = (confinement, request, *, max_line_bytes, threads=0, index=true, progress=None, cancel=None))]
#[allow(clippy::too_many_arguments)] // the request, then one keyword per knob of the call
fn grep_files(
    py: Python<'_>,
    confinement: &Bound<'_, PyConfinement>,
    request: GrepCall,
    max_line_bytes: usize,
    threads: usize,
    index: bool,
    progress: Option<&Bound<'_, PyGrepProgress>>,
    cancel: Option<&Bound<'_, PyCancelFlag>>,
) -> PyResult<PyGrepResult> {
    guard(|| {
        let roots = &confinement.get().roots;
        let GrepCall {
            pattern,
            path,
            output_mode,
            mut grep,
            mut walk,
        } = request;
        grep.mode = OutputMode::parse(&output_mode)?;
        grep.max_line_bytes = max_line_bytes.max(1);
        walk.threads = threads;
        let follow = walk.follow_symlinks;
        let counter = progress.map(|p| Arc::clone(&p.get().searched));
        let cancel = cancel.map(|c| c.get().cancel.clone());
        Ok(py.detach(|| {
            let mut grep = Grep::new(&pattern, grep)?;
            if let Some(counter) = counter {
                grep = grep.counting_into(counter);
            }
            let mut walker = Walker::new(roots, path.as_deref(), walk)?;
            if let Some(cancel) = cancel {
                grep = grep.cancelled_by(cancel.clone());
                walker = walker.cancelled_by(cancel);
            }
            let outcome = if index {
                search_index::grep(roots, &grep, &pattern, &walker, || grep.run(&walker))
            } else {
                grep.run(&walker)
            };
            Ok::<_, SearchError>(PyGrepResult {
                grep,
                outcome,
                follow,
            })
        })?)
    })
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
    fn paths(&self, offset: usize, limit: Option<usize>) -> PyResult<Vec<String>> {
        guard(|| {
            let files = self.outcome.files.iter().skip(offset);
            Ok(files
                .take(limit.unwrap_or(usize::MAX))
                .map(|f| f.display.clone())
                .collect())
        })
    }

    /// Modification times (seconds since the epoch; None when unknown or sorted by path).
    #[pyo3(signature = (offset=0, limit=None))]
    fn modified(&self, offset: usize, limit: Option<usize>) -> PyResult<Vec<Option<f64>>> {
        guard(|| {
            let files = self.outcome.files.iter().skip(offset);
            Ok(files
                .take(limit.unwrap_or(usize::MAX))
                .map(|f| {
                    f.modified
                        .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
                        .map(|d| d.as_secs_f64())
                })
                .collect())
        })
    }

    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.outcome.stats)
    }
}

/// List files under `request.path` matching the gitignore-style `request.pattern`.
#[pyfunction]
#[pyo3(name = "glob", signature = (confinement, request, *, threads=0, index=true, cancel=None))]
fn glob_files(
    py: Python<'_>,
    confinement: &Bound<'_, PyConfinement>,
    request: GlobCall,
    threads: usize,
    index: bool,
    cancel: Option<&Bound<'_, PyCancelFlag>>,
) -> PyResult<PyGlobResult> {
    guard(|| {
        let roots = &confinement.get().roots;
        let GlobCall {
            pattern,
            path,
            sort,
            mut walk,
        } = request;
        let sort = match sort.as_str() {
            "modified" => GlobSort::Modified,
            "path" => GlobSort::Path,
            other => {
                return Err(argument(format!(
                    "sort must be modified or path, not {other:?}"
                )))
            }
        };
        if pattern.is_empty() {
            return Err(argument("pattern must not be empty"));
        }
        walk.globs = vec![pattern];
        walk.threads = threads;
        let cancel = cancel.map(|c| c.get().cancel.clone());
        Ok(py.detach(|| {
            let mut walker = Walker::new(roots, path.as_deref(), walk)?;
            if let Some(cancel) = cancel {
                walker = walker.cancelled_by(cancel);
            }
            let scan = || globbing::run(&walker, sort);
            let outcome = if index {
                search_index::glob(roots, &walker, sort, scan)
            } else {
                scan()
            };
            Ok::<_, SearchError>(PyGlobResult { outcome })
        })?)
    })
}

/// The walker an index for these settings would serve (its start is the root or `path`).
fn index_walker(
    roots: &toolroute_files::Roots,
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
    guard(|| {
        let roots = &confinement.get().roots;
        Ok(py.detach(|| {
            let walker = index_walker(roots, path, hidden, no_ignore)?;
            let wait = std::time::Duration::from_secs_f64(timeout.max(0.0));
            Ok::<_, SearchError>(search_index::warm(roots, &walker, wait))
        })?)
    })
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
    guard(|| {
        let roots = &confinement.get().roots;
        let s = py.detach(|| {
            index_walker(roots, path, hidden, no_ignore).map(|w| search_index::stats(&w))
        })?;
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
        d.set_item("restored", s.restored)?;
        d.set_item("texts", s.texts)?;
        Ok(d)
    })
}

/// Serve as the index daemon under the socket name `name` until unused for its TTL, asked to
/// stop, or the socket is taken; false when another daemon already serves that name.
#[pyfunction]
fn search_daemon_serve(py: Python<'_>, name: &str) -> PyResult<bool> {
    guard(|| {
        Ok(py
            .detach(|| search_index::daemon::serve(name))
            .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?)
    })
}

/// How a process starts the index daemon when queries go to one and none answers (the socket
/// name is added as the last argument).
#[pyfunction]
fn search_daemon_command(argv: Vec<std::path::PathBuf>) -> PyResult<()> {
    guard(|| {
        let argv = argv.into_iter().map(|p| p.into_os_string()).collect();
        search_index::daemon::set_command(argv);
        Ok(())
    })
}

/// Ask this environment's index daemon to end; false when none answered.
#[pyfunction]
fn search_daemon_stop(py: Python<'_>) -> PyResult<bool> {
    guard(|| Ok(py.detach(search_index::daemon::stop)))
}

/// Queries of this process that an index daemon answered.
#[pyfunction]
fn search_daemon_answered() -> PyResult<u64> {
    guard(|| Ok(search_index::daemon::answered()))
}

/// Set this process's default for one index setting (`ttl`, `max_live`, `memory`, `texts`,
/// `cache_files`, `cache_bytes`, `watch`); its `TOOLROUTE_SEARCH_INDEX_*` variable still wins.
#[pyfunction]
fn set_search_index_default(name: &str, value: f64) -> PyResult<()> {
    guard(|| toolroute_search::index::config::set_default(name, value).map_err(argument))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_search_index_default, m)?)?;
    m.add_function(wrap_pyfunction!(search_daemon_serve, m)?)?;
    m.add_function(wrap_pyfunction!(search_daemon_command, m)?)?;
    m.add_function(wrap_pyfunction!(search_daemon_stop, m)?)?;
    m.add_function(wrap_pyfunction!(search_daemon_answered, m)?)?;
    m.add_function(wrap_pyfunction!(search_index_warm, m)?)?;
    m.add_function(wrap_pyfunction!(search_index_stats, m)?)?;
    m.add_class::<PyGrepResult>()?;
    m.add_class::<PyGrepProgress>()?;
    m.add_class::<PyCancelFlag>()?;
    m.add_class::<PyGlobResult>()?;
    m.add_function(wrap_pyfunction!(grep_files, m)?)?;
    m.add_function(wrap_pyfunction!(glob_files, m)?)?;
    Ok(())
}
