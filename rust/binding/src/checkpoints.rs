//! Bindings for checkpoints and rewind (the `toolroute-checkpoints` crate): results as dicts.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{guard, CoreError, ToolExecutionError, ToolPreconditionError};
use crate::files::PyConfinement;
use toolroute_checkpoints::{CheckpointError, Checkpoints, Limits, Summary};

impl From<CheckpointError> for CoreError {
    fn from(e: CheckpointError) -> Self {
        let message = e.to_string();
        CoreError::from(match e {
            CheckpointError::Unknown(_) | CheckpointError::Inside(_) => {
                ToolPreconditionError::new_err(message)
            }
            _ => ToolExecutionError::new_err(message),
        })
    }
}

/// The checkpoints of one confinement's workspace, kept in a folder outside it.
#[pyclass(frozen, name = "Checkpoints", module = "toolroute._core")]
pub struct PyCheckpoints {
    inner: Checkpoints,
    confinement: Py<PyConfinement>,
}

fn summary<'py>(py: Python<'py>, s: Summary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", s.id)?;
    d.set_item("label", s.label)?;
    d.set_item("taken_ns", s.taken_ns)?;
    d.set_item("files", s.files)?;
    d.set_item("uncovered", s.uncovered)?;
    d.set_item("added_bytes", s.added_bytes)?;
    Ok(d)
}

#[pymethods]
impl PyCheckpoints {
    #[new]
    #[pyo3(signature = (confinement, state_dir, max_checkpoints=100, max_store_bytes=1<<30, max_file_bytes=16<<20, max_paths=200_000))]
    fn new(
        py: Python<'_>,
        confinement: Bound<'_, PyConfinement>,
        state_dir: PathBuf,
        max_checkpoints: usize,
        max_store_bytes: u64,
        max_file_bytes: u64,
        max_paths: usize,
    ) -> PyResult<Self> {
        guard(|| {
            let limits = Limits {
                max_checkpoints: max_checkpoints.max(1),
                max_store_bytes,
                max_file_bytes,
                max_paths,
            };
            let roots = confinement.get().roots.clone();
            let inner = py.detach(|| Checkpoints::open(roots, &state_dir, limits))?;
            Ok(Self {
                inner,
                confinement: confinement.unbind(),
            })
        })
    }

    /// Take a checkpoint of the workspace now: `{id, label, taken_ns, files, uncovered,
    /// added_bytes}`.
    #[pyo3(signature = (label=String::new()))]
    fn take<'py>(&self, py: Python<'py>, label: String) -> PyResult<Bound<'py, PyDict>> {
        guard(|| {
            let s = py.detach(|| self.inner.take(&label))?;
            Ok(summary(py, s)?)
        })
    }

    /// Every checkpoint held, oldest first (`added_bytes` is 0).
    fn list<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        guard(|| {
            let all = py.detach(|| self.inner.list())?;
            Ok(all
                .into_iter()
                .map(|s| summary(py, s))
                .collect::<PyResult<_>>()?)
        })
    }

    /// Put the workspace back as it was at checkpoint `id`, all or nothing: `{restored,
    /// removed, unrestorable: [(path, why)], undo}` (`undo`: the checkpoint taken just before).
    fn rewind<'py>(&self, py: Python<'py>, id: u64) -> PyResult<Bound<'py, PyDict>> {
        guard(|| {
            let conf = self.confinement.get();
            let r = py.detach(|| self.inner.rewind(id, conf.options(false)))?;
            let d = PyDict::new(py);
            d.set_item("restored", r.restored)?;
            d.set_item("removed", r.removed)?;
            d.set_item("unrestorable", r.unrestorable)?;
            d.set_item("undo", r.undo)?;
            Ok(d)
        })
    }

    /// Bytes the store holds.
    #[getter]
    fn store_bytes(&self) -> u64 {
        self.inner.store_bytes()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCheckpoints>()
}
