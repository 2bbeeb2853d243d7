//! Bindings for the file tools: confinement, confined reads and atomic writes, edit and
//! apply_patch. Arguments are converted, the GIL is released around file-system work, and
//! errors become toolroute's exceptions.

use std::path::PathBuf;
use std::str::FromStr;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::errors::{confine_err, guard, raise};
use crate::confine::{Access, Roots};
use crate::edit::plan_edit;
use crate::fs::{FsError, Page, Permit, ReadOutcome};
use crate::patch::commit::apply_patch_with;
use crate::patch::{apply_chunks, parse_patch, Hunk, Outcome, PatchError};
use crate::txn::{recover, Durability};
use crate::write::{self, write_text, EditFailure, WriteMode, WriteOptions};

/// The open roots of one context; `resolve` confines a user-supplied path to them.
#[pyclass(frozen, name = "Confinement", module = "toolroute._core")]
pub struct PyConfinement {
    pub roots: Roots,
    pub durability: Durability,
}

#[pymethods]
impl PyConfinement {
    #[new]
    #[pyo3(signature = (workspace, read_only=Vec::new(), durability="full"))]
    fn new(
        py: Python<'_>,
        workspace: PathBuf,
        read_only: Vec<PathBuf>,
        durability: &str,
    ) -> PyResult<Self> {
        let durability =
            Durability::from_str(durability).map_err(|e| raise(py, "ToolArgumentError", e))?;
        let roots = py
            .detach(|| {
                let roots = Roots::new(&workspace, &read_only)?;
                // The next use of a workspace finishes what a crashed write left (see txn.rs).
                let _ = recover(roots.workspace_root());
                Ok(roots)
            })
            .map_err(|e| confine_err(py, e))?;
        Ok(Self { roots, durability })
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
        guard(py, || {
            py.detach(|| self.roots.resolve(path, access))
                .map_err(|e| confine_err(py, e))
        })
    }

    /// Finish or clean up writes a crashed process left in the workspace (also done when the
    /// confinement is made): `(transactions rolled forward, transactions rolled back)`.
    fn recover(&self, py: Python<'_>) -> PyResult<(usize, usize)> {
        let done = py
            .detach(|| recover(self.roots.workspace_root()))
            .map_err(|e| raise(py, "ToolExecutionError", format!("recovery failed: {e}")))?;
        Ok((done.rolled_forward, done.rolled_back))
    }
}

impl PyConfinement {
    fn options(&self, write_read_only: bool) -> WriteOptions {
        WriteOptions {
            durability: self.durability,
            permit: Permit {
                read_only_files: write_read_only,
            },
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
    #[getter]
    fn head<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.page.head)
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
    let roots = &confinement.get().roots;
    let outcome = py
        .detach(|| roots.read_page(&path, offset, max_lines, max_bytes))
        .map_err(|e| fs_err(py, e))?;
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
}

fn fs_err(py: Python<'_>, e: FsError) -> PyErr {
    match e {
        FsError::Denied(c) => confine_err(py, c),
        FsError::Io { .. } => raise(py, "ToolExecutionError", e.to_string()),
        _ => raise(py, "ToolPreconditionError", e.to_string()),
    }
}

/// An edit whose strings are fine but do not fit the file is a failed run, not a malformed call.
fn edit_err_class(e: &crate::edit::EditError) -> &'static str {
    match e {
        crate::edit::EditError::EmptyOld | crate::edit::EditError::Identical => "ToolArgumentError",
        _ => "ToolPreconditionError",
    }
}

fn patch_err(py: Python<'_>, e: PatchError) -> PyErr {
    let class = match &e {
        PatchError::File { source, .. } => match **source {
            FsError::Denied(_) => "PathDeniedError",
            FsError::Io { .. } => "ToolExecutionError",
            _ => "ToolPreconditionError",
        },
        PatchError::Mismatch { .. } => "ToolPreconditionError",
        PatchError::Commit { source, .. } => match **source {
            FsError::Denied(_) => "PathDeniedError",
            FsError::Io { .. } => "ToolExecutionError",
            _ => "ToolPreconditionError",
        },
        _ => "ToolArgumentError",
    };
    raise(py, class, e.to_string())
}

/// Read a confined file: `(resolved, head, size)`, at most `max_bytes` of it from the start.
#[pyfunction]
fn read_file_head<'py>(
    py: Python<'py>,
    confinement: &Bound<'py, PyConfinement>,
    path: String,
    max_bytes: u64,
) -> PyResult<(PathBuf, Bound<'py, PyBytes>, u64)> {
    let roots = &confinement.get().roots;
    let (resolved, bytes, size) = py
        .detach(|| {
            let resolved = roots.resolve(&path, Access::Read)?;
            let (bytes, size) = roots.read_head(&path, max_bytes)?;
            Ok::<_, FsError>((resolved, bytes, size))
        })
        .map_err(|e| fs_err(py, e))?;
    Ok((resolved, PyBytes::new(py, &bytes), size))
}

/// Write `content` to a confined path atomically. `mode`: create | overwrite | append. With
/// `keep_style`, an existing file keeps its encoding and all-CRLF endings. Returns a dict.
#[pyfunction]
#[pyo3(signature = (confinement, path, content, mode, max_bytes, keep_style=true, write_read_only=false))]
#[allow(clippy::too_many_arguments)]
fn write_file_text<'py>(
    py: Python<'py>,
    confinement: &Bound<'py, PyConfinement>,
    path: String,
    content: String,
    mode: String,
    max_bytes: u64,
    keep_style: bool,
    write_read_only: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let conf = confinement.get();
    let mode = WriteMode::from_str(&mode).map_err(|e| raise(py, "ToolArgumentError", e))?;
    let opts = conf.options(write_read_only);
    let w = py
        .detach(|| {
            write_text(
                &conf.roots,
                &path,
                &content,
                mode,
                max_bytes,
                keep_style,
                opts,
            )
        })
        .map_err(|e| fs_err(py, e))?;
    let out = PyDict::new(py);
    out.set_item("resolved", w.resolved)?;
    out.set_item("created", w.created)?;
    out.set_item("bytes_written", w.bytes_written)?;
    out.set_item("size", w.size)?;
    Ok(out)
}

/// Exact-string edit of a confined file, written atomically. Returns a dict.
#[pyfunction]
#[pyo3(signature = (confinement, path, old_string, new_string, replace_all, max_bytes, write_read_only=false))]
#[allow(clippy::too_many_arguments)]
fn edit_file<'py>(
    py: Python<'py>,
    confinement: &Bound<'py, PyConfinement>,
    path: String,
    old_string: String,
    new_string: String,
    replace_all: bool,
    max_bytes: u64,
    write_read_only: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let conf = confinement.get();
    let opts = conf.options(write_read_only);
    let done = py.detach(|| {
        write::edit_file(
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
        EditFailure::Fs(e) => fs_err(py, e),
        EditFailure::Edit(e) => raise(py, edit_err_class(&e), format!("edit {path}: {e}")),
    })?;
    let out = PyDict::new(py);
    out.set_item("resolved", resolved)?;
    out.set_item("replacements", outcome.replacements())?;
    out.set_item("lines", &outcome.lines)?;
    out.set_item("eol_adapted", outcome.eol_adapted)?;
    Ok(out)
}

fn outcome_dict<'py>(py: Python<'py>, o: &Outcome) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("added", &o.added)?;
    out.set_item("modified", &o.modified)?;
    out.set_item(
        "moved",
        PyList::new(py, o.moved.iter().map(|(a, b)| (a, b)))?,
    )?;
    out.set_item("deleted", &o.deleted)?;
    let files = PyList::empty(py);
    for f in &o.files {
        let d = PyDict::new(py);
        d.set_item("path", &f.path)?;
        d.set_item("action", f.action)?;
        let hunks = PyList::empty(py);
        for c in &f.chunks {
            let h = PyDict::new(py);
            h.set_item("line", c.line)?;
            h.set_item("match", c.tier.describe())?;
            hunks.append(h)?;
        }
        d.set_item("hunks", hunks)?;
        files.append(d)?;
    }
    out.set_item("files", files)?;
    out.set_item("summary", o.summary())?;
    Ok(out)
}

/// Apply a Codex-style patch inside the confinement, all files or none. Returns a dict.
#[pyfunction]
#[pyo3(name = "apply_patch", signature = (confinement, patch, max_bytes, write_read_only=false))]
fn py_apply_patch<'py>(
    py: Python<'py>,
    confinement: &Bound<'py, PyConfinement>,
    patch: String,
    max_bytes: u64,
    write_read_only: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let conf = confinement.get();
    let opts = conf.options(write_read_only);
    let outcome = py
        .detach(|| apply_patch_with(&conf.roots, &patch, max_bytes, opts))
        .map_err(|e| patch_err(py, e))?;
    outcome_dict(py, &outcome)
}

/// In memory: apply the single `*** Update File:` section of `patch` to `content`.
#[pyfunction]
fn apply_update_to_text(py: Python<'_>, patch: &str, content: &str) -> PyResult<String> {
    let hunks = parse_patch(patch).map_err(|e| raise(py, "ToolArgumentError", e.to_string()))?;
    match hunks.as_slice() {
        [Hunk::Update { path, chunks, .. }] => py
            .detach(|| apply_chunks(path, content, chunks))
            .map(|(text, _)| text)
            .map_err(|e| raise(py, "ToolArgumentError", e.message)),
        _ => Err(raise(
            py,
            "ToolArgumentError",
            "expected exactly one *** Update File: section".into(),
        )),
    }
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
    let plan = py
        .detach(|| plan_edit(content, &old_string, &new_string, replace_all))
        .map_err(|e| raise(py, edit_err_class(&e), e.to_string()))?;
    // Fill the result bytes object directly: no intermediate copy of the new file.
    let bytes = PyBytes::new_with(py, plan.output_len(content.len()), |buf| {
        plan.fill(content, buf);
        Ok(())
    })?;
    Ok((bytes, plan.replacements(), plan.lines))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyConfinement>()?;
    m.add_class::<PyFilePage>()?;
    m.add_class::<PyDirListing>()?;
    m.add_function(wrap_pyfunction!(read_page, m)?)?;
    m.add_function(wrap_pyfunction!(read_file_head, m)?)?;
    m.add_function(wrap_pyfunction!(write_file_text, m)?)?;
    m.add_function(wrap_pyfunction!(edit_file, m)?)?;
    m.add_function(wrap_pyfunction!(py_apply_patch, m)?)?;
    m.add_function(wrap_pyfunction!(apply_update_to_text, m)?)?;
    m.add_function(wrap_pyfunction!(edit_bytes, m)?)?;
    Ok(())
}
