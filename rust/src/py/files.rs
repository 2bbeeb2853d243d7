//! Bindings for the file tools: confinement, edit and apply_patch.

use std::path::PathBuf;

use pyo3::prelude::*;

use super::errors::{confine_err, guard};
use crate::confine::{Access, Roots};

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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyConfinement>()?;
    Ok(())
}
