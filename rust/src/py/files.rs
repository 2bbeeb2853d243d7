//! Bindings for the file tools: confinement, confined reads and atomic writes, edit and
//! apply_patch. Arguments are converted, the GIL is released around file-system work, and
//! errors become toolroute's exceptions.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::errors::{confine_err, guard, raise};
use crate::confine::{Access, FsError, Roots};
use crate::edit::{conform_to_style, plan_edit, EditError};
use crate::patch::{apply_chunks, apply_patch, parse_patch, Hunk, Outcome, PatchError};

/// Canonicalised roots of one context; `resolve` confines a user-supplied path to them.
#[pyclass(frozen, name = "Confinement", module = "toolroute._core")]
pub struct PyConfinement {
    pub roots: Roots,
}

#[pymethods]
impl PyConfinement {
    #[new]
    #[pyo3(signature = (workspace, read_only=Vec::new()))]
    fn new(py: Python<'_>, workspace: PathBuf, read_only: Vec<PathBuf>) -> PyResult<Self> {
        let roots = py
            .detach(|| Roots::new(&workspace, &read_only))
            .map_err(|e| confine_err(py, e))?;
        Ok(Self { roots })
    }

    #[getter]
    fn workspace(&self) -> PathBuf {
        self.roots.workspace().to_path_buf()
    }

    #[getter]
    fn read_only(&self) -> Vec<PathBuf> {
        self.roots.read_only().to_vec()
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
}

fn fs_err(py: Python<'_>, e: FsError) -> PyErr {
    match e {
        FsError::Denied(c) => confine_err(py, c),
        FsError::Io { .. } => raise(py, "ToolExecutionError", e.to_string()),
        _ => raise(py, "ToolPreconditionError", e.to_string()),
    }
}

/// An edit whose strings are fine but do not fit the file is a failed run, not a malformed call.
fn edit_err_class(e: &EditError) -> &'static str {
    match e {
        EditError::EmptyOld | EditError::Identical => "ToolArgumentError",
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
        PatchError::Commit { .. } => "ToolExecutionError",
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
            let (bytes, size) = roots.read_head(&path, &resolved, max_bytes)?;
            Ok::<_, FsError>((resolved, bytes, size))
        })
        .map_err(|e| fs_err(py, e))?;
    Ok((resolved, PyBytes::new(py, &bytes), size))
}

/// Write `content` to a confined path atomically. `mode`: create | overwrite | append. With
/// `keep_style`, an overwrite keeps the file's BOM and all-CRLF endings. Returns a dict.
#[pyfunction]
#[pyo3(signature = (confinement, path, content, mode, max_bytes, keep_style=true))]
fn write_file_text<'py>(
    py: Python<'py>,
    confinement: &Bound<'py, PyConfinement>,
    path: String,
    content: String,
    mode: String,
    max_bytes: u64,
    keep_style: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let roots = &confinement.get().roots;
    if !matches!(mode.as_str(), "create" | "overwrite" | "append") {
        return Err(raise(
            py,
            "ToolArgumentError",
            format!("unsupported write mode {mode:?}; use create, overwrite or append"),
        ));
    }
    let (resolved, created, written, size) = py
        .detach(|| {
            let resolved = roots.resolve(&path, Access::Write)?;
            if resolved.is_dir() {
                return Err(FsError::IsDir { path: path.clone() });
            }
            let existing = match mode.as_str() {
                "create" => None,
                _ => roots.read_existing(&path, &resolved, Access::Write, max_bytes)?,
            };
            let file_mode = existing.as_ref().map(|e| e.mode);
            let new_part = match (&existing, keep_style) {
                (Some(e), true) if mode == "overwrite" || e.bytes.is_empty() => {
                    conform_to_style(&e.bytes, &content)
                }
                (Some(e), true) => {
                    // Appending: match CRLF files, never add a second BOM.
                    let mut styled = conform_to_style(&e.bytes, &content);
                    if styled.starts_with(b"\xef\xbb\xbf") && !content.starts_with('\u{feff}') {
                        styled.drain(..3);
                    }
                    styled
                }
                _ => content.clone().into_bytes(),
            };
            let bytes = match (&existing, mode.as_str()) {
                (Some(e), "append") => [e.bytes.as_slice(), &new_part].concat(),
                _ => new_part.clone(),
            };
            if bytes.len() as u64 > max_bytes {
                return Err(FsError::TooLarge {
                    path: path.clone(),
                    size: bytes.len() as u64,
                    limit: max_bytes,
                });
            }
            roots.write_atomic(&path, &resolved, &bytes, file_mode, mode == "create")?;
            Ok((resolved, existing.is_none(), new_part.len(), bytes.len()))
        })
        .map_err(|e| fs_err(py, e))?;
    let out = PyDict::new(py);
    out.set_item("resolved", resolved)?;
    out.set_item("created", created)?;
    out.set_item("bytes_written", written)?;
    out.set_item("size", size)?;
    Ok(out)
}

/// Exact-string edit of a confined file, written atomically. Returns a dict.
#[pyfunction]
#[pyo3(signature = (confinement, path, old_string, new_string, replace_all, max_bytes))]
fn edit_file<'py>(
    py: Python<'py>,
    confinement: &Bound<'py, PyConfinement>,
    path: String,
    old_string: String,
    new_string: String,
    replace_all: bool,
    max_bytes: u64,
) -> PyResult<Bound<'py, PyDict>> {
    enum Failure {
        Fs(FsError),
        Edit(EditError),
    }
    let roots = &confinement.get().roots;
    let done = py.detach(|| {
        let resolved = roots
            .resolve(&path, Access::Write)
            .map_err(|e| Failure::Fs(e.into()))?;
        let existing = roots
            .read_required(&path, &resolved, Access::Write, max_bytes)
            .map_err(Failure::Fs)?;
        let plan = plan_edit(&existing.bytes, &old_string, &new_string, replace_all)
            .map_err(Failure::Edit)?;
        let parts = plan.parts(&existing.bytes);
        roots
            .write_atomic_parts(&path, &resolved, &parts, Some(existing.mode), false)
            .map_err(Failure::Fs)?;
        drop(parts);
        Ok((resolved, plan))
    });
    let (resolved, outcome) = done.map_err(|f| match f {
        Failure::Fs(e) => fs_err(py, e),
        Failure::Edit(e) => raise(py, edit_err_class(&e), format!("edit {path}: {e}")),
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
#[pyo3(name = "apply_patch")]
fn py_apply_patch<'py>(
    py: Python<'py>,
    confinement: &Bound<'py, PyConfinement>,
    patch: String,
    max_bytes: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let roots = &confinement.get().roots;
    let outcome = py
        .detach(|| apply_patch(roots, &patch, max_bytes))
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
    m.add_function(wrap_pyfunction!(read_file_head, m)?)?;
    m.add_function(wrap_pyfunction!(write_file_text, m)?)?;
    m.add_function(wrap_pyfunction!(edit_file, m)?)?;
    m.add_function(wrap_pyfunction!(py_apply_patch, m)?)?;
    m.add_function(wrap_pyfunction!(apply_update_to_text, m)?)?;
    m.add_function(wrap_pyfunction!(edit_bytes, m)?)?;
    Ok(())
}
