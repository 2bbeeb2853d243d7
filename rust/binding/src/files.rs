//! Bindings for the file tools: confinement, confined reads and atomic writes, edit and
//! apply_patch. Arguments are converted, the GIL is released around file-system work, and
//! errors become toolroute's exceptions.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{argument, edit_error, guard, CoreError, ToolExecutionError};
use toolroute_edits::patch::{self, apply_patch_with, V4aOperation};
use toolroute_edits::patch::{apply_chunks, parse_patch, Hunk, Outcome};
use toolroute_edits::{plan_edit, write_bytes, write_text, EditFailure, WriteMode};
use toolroute_files::FsError;
use toolroute_files::WriteOptions;
use toolroute_files::{digest_parts, Session};
use toolroute_files::{recover, Durability};
use toolroute_files::{Access, Roots};
use toolroute_files::{Page, Permit, ReadOutcome};

/// One session's stale-read guard (what it last read or wrote of each file), shared by every
/// confinement made with it.
#[pyclass(frozen, name = "FileSession", module = "toolroute._core")]
pub struct PyFileSession {
    pub session: Arc<Session>,
}

#[pymethods]
impl PyFileSession {
    #[new]
    #[pyo3(signature = (strict=false))]
    fn new(strict: bool) -> Self {
        Self {
            session: Arc::new(Session::new(strict)),
        }
    }

    /// Whether rewriting a file this session never read is refused.
    #[getter]
    fn strict(&self) -> bool {
        self.session.strict()
    }

    /// Files the session remembers.
    fn __len__(&self) -> usize {
        self.session.len()
    }

    /// Whether the session last saw `resolved` (a path as `Confinement.resolve` gives it) hold
    /// exactly `content`.
    fn saw(&self, resolved: PathBuf, content: &[u8]) -> bool {
        self.session.known(&resolved) == Some(digest_parts(&[content]))
    }
}

/// The open roots of one context; `resolve` confines a user-supplied path to them.
#[pyclass(frozen, name = "Confinement", module = "toolroute._core")]
pub struct PyConfinement {
    pub roots: Roots,
    pub durability: Durability,
    /// The stale-read guard its reads and writes keep, if any.
    pub session: Option<Arc<Session>>,
}

#[pymethods]
impl PyConfinement {
    #[new]
    #[pyo3(signature = (workspace, read_only=Vec::new(), durability="full", session=None))]
    fn new(
        py: Python<'_>,
        workspace: PathBuf,
        read_only: Vec<PathBuf>,
        durability: &str,
        session: Option<&Bound<'_, PyFileSession>>,
    ) -> PyResult<Self> {
        let session = session.map(|s| s.get().session.clone());
        guard(|| {
            let durability = Durability::from_str(durability).map_err(argument)?;
            let roots = py.detach(|| {
                let roots = Roots::new(&workspace, &read_only)?;
                // The next use of a workspace finishes what a crashed write left (see txn.rs).
                let _ = recover(roots.workspace_root());
                Ok::<_, toolroute_files::ConfineError>(roots)
            })?;
            Ok(Self {
                roots,
                durability,
                session,
            })
        })
    }

    #[getter]
    fn workspace(&self) -> PathBuf {
        self.roots.workspace().to_path_buf()
    }

    #[getter]
    fn read_only(&self) -> Vec<PathBuf> {
        self.roots.read_only().to_vec()
    }

    #[getter]
    fn durability(&self) -> &'static str {
        match self.durability {
            Durability::None => "none",
            Durability::File => "file",
            Durability::Full => "full",
        }
    }

    /// Resolve `path` (relative to the workspace, or absolute); raises `PathDeniedError` when it
    /// lands outside the roots, or inside a read-only root with `write=True`.
    #[pyo3(signature = (path, write=false))]
    fn resolve(&self, py: Python<'_>, path: &str, write: bool) -> PyResult<PathBuf> {
        let access = if write { Access::Write } else { Access::Read };
        guard(|| Ok(py.detach(|| self.roots.resolve(path, access))?))
    }

    /// Finish or clean up writes a crashed process left in the workspace (also done when the
    /// confinement is made): `(transactions rolled forward, transactions rolled back)`.
    fn recover(&self, py: Python<'_>) -> PyResult<(usize, usize)> {
        guard(|| {
            let done = py
                .detach(|| recover(self.roots.workspace_root()))
                .map_err(|e| ToolExecutionError::new_err(format!("recovery failed: {e}")))?;
            Ok((done.rolled_forward, done.rolled_back))
        })
    }
}

impl PyConfinement {
    pub fn options(&self, write_read_only: bool) -> WriteOptions<'_> {
        WriteOptions {
            durability: self.durability,
            permit: Permit {
                read_only_files: write_read_only,
            },
            session: self.session.as_deref(),
        }
    }
}

/// One page of a text file, as `read_page` returns it.
#[pyclass(frozen, name = "FilePage", module = "toolroute._core")]
pub struct PyFilePage {
    page: Page,
}

#[pymethods]
impl PyFilePage {
    #[getter]
    fn resolved(&self) -> PathBuf {
        self.page.resolved.clone()
    }
    #[getter]
    fn size(&self) -> u64 {
        self.page.size
    }
    /// Why the file is not text, if it is not (a known binary format, or NUL bytes).
    #[getter]
    fn binary(&self) -> Option<&'static str> {
        self.page.binary
    }
    /// `(codec, label)` of the byte-order mark the file starts with, if any (the body leaves
    /// the mark out).
    #[getter]
    fn bom(&self) -> Option<(&'static str, &'static str)> {
        self.page.bom.map(|enc| (enc.codec(), enc.bom_label()))
    }
    #[getter]
    fn whole(&self) -> bool {
        self.page.whole
    }
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.page.body)
    }
    #[getter]
    fn first(&self) -> usize {
        self.page.first
    }
    #[getter]
    fn lines(&self) -> usize {
        self.page.lines
    }
    #[getter]
    fn total(&self) -> Option<usize> {
        self.page.total
    }
    #[getter]
    fn scanned(&self) -> u64 {
        self.page.scanned
    }
    #[getter]
    fn capped(&self) -> bool {
        self.page.capped
    }
}

/// A folder's listing, as `read_page` returns it for a folder.
#[pyclass(frozen, name = "DirListing", module = "toolroute._core")]
pub struct PyDirListing {
    #[pyo3(get)]
    resolved: PathBuf,
    #[pyo3(get)]
    names: Vec<String>,
}

/// read_file in one call: open `path` once beneath the roots; a folder gives its listing, a
/// file the page of `max_lines` lines from line `offset` (1-based), read only as far as needed.
#[pyfunction]
fn read_page<'py>(
    py: Python<'py>,
    confinement: &Bound<'py, PyConfinement>,
    path: String,
    offset: usize,
    max_lines: usize,
    max_bytes: u64,
) -> PyResult<Bound<'py, PyAny>> {
    guard(|| {
        let conf = confinement.get();
        let roots = &conf.roots;
        let outcome = py.detach(|| {
            let want = conf.session.is_some();
            let outcome = roots.read_page_with(&path, offset, max_lines, max_bytes, want)?;
            if let (Some(session), ReadOutcome::Page(page)) = (&conf.session, &outcome) {
                // The guard knows the whole file, not only the page shown: from this read when
                // it saw all of it, else by reading the rest.
                match page.digest {
                    Some(d) => session.note(page.resolved.clone(), d),
                    None => session.note_read(roots, &path, max_bytes)?,
                }
            }
            Ok::<_, FsError>(outcome)
        })?;
        Ok(match outcome {
            ReadOutcome::Page(page) => Bound::new(py, PyFilePage { page })?.into_any(),
            ReadOutcome::Dir(l) => Bound::new(
                py,
                PyDirListing {
                    resolved: l.resolved,
                    names: l.names,
                },
            )?
            .into_any(),
        })
    })
}

/// Read a confined file: `(resolved, head, size)`, at most `max_bytes` of it from the start.
/// With `note`, the stale-read guard records a file read whole (a read for the model); without,
/// it does not (toolroute's own look at a file).
#[pyfunction]
#[pyo3(signature = (confinement, path, max_bytes, note=true))]
fn read_file_head<'py>(
    py: Python<'py>,
    confinement: &Bound<'py, PyConfinement>,
    path: String,
    max_bytes: u64,
    note: bool,
) -> PyResult<(PathBuf, Bound<'py, PyBytes>, u64)> {
    guard(|| {
        let conf = confinement.get();
        let roots = &conf.roots;
        let (resolved, bytes, size) = py.detach(|| {
            let resolved = roots.resolve(&path, Access::Read)?;
            let (bytes, size) = roots.read_head(&path, max_bytes)?;
            if let Some(session) = conf
                .session
                .as_ref()
                .filter(|_| note && bytes.len() as u64 == size)
            {
                session.note(resolved.clone(), digest_parts(&[&bytes]));
            }
            Ok::<_, FsError>((resolved, bytes, size))
        })?;
        Ok((resolved, PyBytes::new(py, &bytes), size))
    })
}

/// What write_file did.
#[pyclass(frozen, get_all, name = "WriteResult", module = "toolroute._core")]
pub struct PyWriteResult {
    resolved: PathBuf,
    created: bool,
    bytes_written: usize,
    size: usize,
}

/// Write `content` to a confined path atomically. `mode`: create | overwrite | append. With
/// `keep_style`, an existing file keeps its encoding and all-CRLF endings.
#[pyfunction]
#[pyo3(signature = (confinement, path, content, mode, max_bytes, keep_style=true, write_read_only=false))]
#[allow(clippy::too_many_arguments)]
fn write_file_text(
    py: Python<'_>,
    confinement: &Bound<'_, PyConfinement>,
    path: String,
    content: String,
    mode: String,
    max_bytes: u64,
    keep_style: bool,
    write_read_only: bool,
) -> PyResult<PyWriteResult> {
    guard(|| {
        let conf = confinement.get();
        let mode = WriteMode::from_str(&mode).map_err(argument)?;
        let opts = conf.options(write_read_only);
        let w = py.detach(|| {
            write_text(
                &conf.roots,
                &path,
                &content,
                mode,
                max_bytes,
                keep_style,
                opts,
            )
        })?;
        Ok(PyWriteResult {
            resolved: w.resolved,
            created: w.created,
            bytes_written: w.bytes_written,
            size: w.size,
        })
    })
}

/// Write `content` to a confined path atomically, byte for byte (a file API's write, where
/// write_file_text keeps a file's text style). `mode`: create | overwrite | append.
#[pyfunction]
#[pyo3(signature = (confinement, path, content, mode, max_bytes, write_read_only=false))]
fn write_file_bytes(
    py: Python<'_>,
    confinement: &Bound<'_, PyConfinement>,
    path: String,
    content: &[u8],
    mode: String,
    max_bytes: u64,
    write_read_only: bool,
) -> PyResult<PyWriteResult> {
    guard(|| {
        let conf = confinement.get();
        let mode = WriteMode::from_str(&mode).map_err(argument)?;
        let opts = conf.options(write_read_only);
        let w = py.detach(|| write_bytes(&conf.roots, &path, content, mode, max_bytes, opts))?;
        Ok(PyWriteResult {
            resolved: w.resolved,
            created: w.created,
            bytes_written: w.bytes_written,
            size: w.size,
        })
    })
}

/// What edit did.
#[pyclass(frozen, get_all, name = "EditResult", module = "toolroute._core")]
pub struct PyEditResult {
    resolved: PathBuf,
    replacements: usize,
    /// 1-based line of each replacement, the first `edit::REPORTED_LINES` of them.
    lines: Vec<usize>,
    /// The strings' line endings were changed to the file's (CRLF).
    eol_adapted: bool,
}

/// Exact-string edit of a confined file, written atomically.
#[pyfunction]
#[pyo3(signature = (confinement, path, old_string, new_string, replace_all, max_bytes, write_read_only=false))]
#[allow(clippy::too_many_arguments)]
fn edit_file(
    py: Python<'_>,
    confinement: &Bound<'_, PyConfinement>,
    path: String,
    old_string: String,
    new_string: String,
    replace_all: bool,
    max_bytes: u64,
    write_read_only: bool,
) -> PyResult<PyEditResult> {
    guard(|| {
        let conf = confinement.get();
        let opts = conf.options(write_read_only);
        let done = py.detach(|| {
            toolroute_edits::edit_file(
                &conf.roots,
                &path,
                &old_string,
                &new_string,
                replace_all,
                max_bytes,
                opts,
            )
        });
        let (resolved, outcome) = done.map_err(|f| match f {
            EditFailure::Fs(e) => CoreError::from(e),
            EditFailure::Edit(e) => edit_error(&format!("edit {path}: "), e),
        })?;
        Ok(PyEditResult {
            resolved,
            replacements: outcome.replacements(),
            lines: outcome.lines,
            eol_adapted: outcome.eol_adapted,
        })
    })
}

/// One file a patch changed: its path as written, `add`/`update`/`delete`/`move`, and where
/// each hunk landed.
#[pyclass(frozen, get_all, name = "PatchedFile", module = "toolroute._core")]
pub struct PyPatchedFile {
    path: String,
    action: &'static str,
    /// `(line, match)` per hunk: the 1-based line it starts at in the original, and how
    /// exactly its context matched (the seek tier).
    hunks: Vec<(usize, &'static str)>,
}

/// What a patch did, paths as written in it.
#[pyclass(frozen, get_all, name = "PatchResult", module = "toolroute._core")]
pub struct PyPatchResult {
    added: Vec<String>,
    modified: Vec<String>,
    /// `(from, to)` per move.
    moved: Vec<(String, String)>,
    deleted: Vec<String>,
    files: Vec<Py<PyPatchedFile>>,
    /// Codex's success text.
    summary: String,
}

impl PyPatchResult {
    fn new(py: Python<'_>, o: Outcome) -> PyResult<Self> {
        let summary = o.summary();
        let files = o
            .files
            .into_iter()
            .map(|f| {
                let hunks = f
                    .chunks
                    .iter()
                    .map(|c| (c.line, c.tier.describe()))
                    .collect();
                Py::new(
                    py,
                    PyPatchedFile {
                        path: f.path,
                        action: f.action,
                        hunks,
                    },
                )
            })
            .collect::<PyResult<_>>()?;
        Ok(Self {
            added: o.added,
            modified: o.modified,
            moved: o.moved,
            deleted: o.deleted,
            files,
            summary,
        })
    }
}

/// Apply a Codex-style patch inside the confinement, all files or none.
#[pyfunction]
#[pyo3(name = "apply_patch", signature = (confinement, patch, max_bytes, write_read_only=false))]
fn py_apply_patch(
    py: Python<'_>,
    confinement: &Bound<'_, PyConfinement>,
    patch: String,
    max_bytes: u64,
    write_read_only: bool,
) -> PyResult<PyPatchResult> {
    guard(|| {
        let conf = confinement.get();
        let opts = conf.options(write_read_only);
        let outcome = py.detach(|| apply_patch_with(&conf.roots, &patch, max_bytes, opts))?;
        Ok(PyPatchResult::new(py, outcome)?)
    })
}

/// Apply OpenAI `apply_patch` operations (V4A diffs) inside the confinement, all or none, by
/// V4A's rules (`edits::patch::apply_v4a`): `operations` are `PatchOperation`s
/// (`builtins/patch_operation.py`), read attribute by attribute.
#[pyfunction]
#[pyo3(signature = (confinement, operations, max_bytes, write_read_only=false))]
fn apply_v4a(
    py: Python<'_>,
    confinement: &Bound<'_, PyConfinement>,
    operations: Vec<Operation>,
    max_bytes: u64,
    write_read_only: bool,
) -> PyResult<PyPatchResult> {
    guard(|| {
        let conf = confinement.get();
        let opts = conf.options(write_read_only);
        let operations = operations.into_iter().map(|o| o.0).collect();
        let outcome = py.detach(|| patch::apply_v4a(&conf.roots, operations, max_bytes, opts))?;
        Ok(PyPatchResult::new(py, outcome)?)
    })
}

/// A `PatchOperation` as the patch engine takes it: its four attributes, nothing restated.
struct Operation(V4aOperation);

impl<'a, 'py> FromPyObject<'a, 'py> for Operation {
    type Error = PyErr;

    fn extract(op: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Self(V4aOperation {
            kind: op.getattr("type")?.extract()?,
            path: op.getattr("path")?.extract()?,
            diff: op.getattr("diff")?.extract()?,
            move_to: op.getattr("move_to")?.extract()?,
        }))
    }
}

/// In memory: apply the single `*** Update File:` section of `patch` to `content`.
#[pyfunction]
fn apply_update_to_text(py: Python<'_>, patch: &str, content: &str) -> PyResult<String> {
    guard(|| {
        let hunks = parse_patch(patch).map_err(|e| argument(e.to_string()))?;
        match hunks.as_slice() {
            [Hunk::Update { path, chunks, .. }] => py
                .detach(|| apply_chunks(path, content, chunks))
                .map(|(text, _)| text)
                .map_err(|e| argument(e.message)),
            _ => Err(argument("expected exactly one *** Update File: section")),
        }
    })
}

/// In memory: the edit on bytes; `(new_bytes, replacements, lines)`.
#[pyfunction]
fn edit_bytes<'py>(
    py: Python<'py>,
    content: &[u8],
    old_string: String,
    new_string: String,
    replace_all: bool,
) -> PyResult<(Bound<'py, PyBytes>, usize, Vec<usize>)> {
    guard(|| {
        let plan = py
            .detach(|| plan_edit(content, &old_string, &new_string, replace_all))
            .map_err(|e| edit_error("", e))?;
        // Fill the result bytes object directly: no intermediate copy of the new file.
        let bytes = PyBytes::new_with(py, plan.output_len(content.len()), |buf| {
            plan.fill(content, buf);
            Ok(())
        })?;
        Ok((bytes, plan.replacements(), plan.lines))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFileSession>()?;
    m.add_class::<PyConfinement>()?;
    m.add_class::<PyFilePage>()?;
    m.add_class::<PyDirListing>()?;
    m.add_class::<PyWriteResult>()?;
    m.add_class::<PyEditResult>()?;
    m.add_class::<PyPatchedFile>()?;
    m.add_class::<PyPatchResult>()?;
    m.add_function(wrap_pyfunction!(read_page, m)?)?;
    m.add_function(wrap_pyfunction!(read_file_head, m)?)?;
    m.add_function(wrap_pyfunction!(write_file_text, m)?)?;
    m.add_function(wrap_pyfunction!(write_file_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(edit_file, m)?)?;
    m.add_function(wrap_pyfunction!(py_apply_patch, m)?)?;
    m.add_function(wrap_pyfunction!(apply_v4a, m)?)?;
    m.add_function(wrap_pyfunction!(apply_update_to_text, m)?)?;
    m.add_function(wrap_pyfunction!(edit_bytes, m)?)?;
    Ok(())
}
