//! Binding for the routing table; targets are arbitrary Python objects.

use std::sync::RwLock;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::errors::{raise, route_err};
use crate::routing::{Kind, Lookup, RoutingTable};

fn kind(py: Python<'_>, k: u8) -> PyResult<Kind> {
    Kind::from_index(k).ok_or_else(|| {
        raise(
            py,
            "ToolRegistrationError",
            format!("unknown tool kind {k}"),
        )
    })
}

/// Each entry stores a ready `(kind, target)` tuple so a lookup allocates nothing.
#[pyclass(frozen, name = "RouteTable", module = "toolroute._core")]
pub struct PyRouteTable {
    table: RwLock<RoutingTable<Py<PyTuple>>>,
}

impl PyRouteTable {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, RoutingTable<Py<PyTuple>>> {
        self.table.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, RoutingTable<Py<PyTuple>>> {
        self.table.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyRouteTable {
    #[new]
    fn new() -> Self {
        Self {
            table: RwLock::new(RoutingTable::new()),
        }
    }

    /// Register a shared tool of `kind` (0 built-in, 2 local MCP, 3 function, 4 global MCP).
    #[pyo3(signature = (kind_index, name, target, replace=false))]
    fn insert(
        &self,
        py: Python<'_>,
        kind_index: u8,
        name: &str,
        target: Py<PyAny>,
        replace: bool,
    ) -> PyResult<()> {
        let k = kind(py, kind_index)?;
        let entry = PyTuple::new(
            py,
            [
                kind_index.into_pyobject(py)?.into_any(),
                target.into_bound(py),
            ],
        )?
        .unbind();
        self.write()
            .insert(k, name, entry, replace)
            .map_err(|e| route_err(py, e))
    }

    /// Register a per-user tool; returns its exposed `user_{userId}_tool_{toolName}` name.
    fn insert_user(
        &self,
        py: Python<'_>,
        user_id: &str,
        tool: &str,
        target: Py<PyAny>,
    ) -> PyResult<String> {
        let entry = PyTuple::new(
            py,
            [1u8.into_pyobject(py)?.into_any(), target.into_bound(py)],
        )?
        .unbind();
        self.write()
            .insert_user(user_id, tool, entry)
            .map_err(|e| route_err(py, e))
    }

    fn remove(&self, py: Python<'_>, kind_index: u8, name: &str) -> PyResult<bool> {
        let k = kind(py, kind_index)?;
        Ok(self.write().remove(k, name).is_some())
    }

    fn remove_user(&self, user_id: &str, tool: &str) -> bool {
        self.write().remove_user(user_id, tool).is_some()
    }

    /// `(user_id, tool)` of a registered user-form name, else None.
    fn user_entry(&self, name: &str) -> Option<(String, String)> {
        self.read()
            .user_entry(name)
            .map(|(u, t)| (u.to_string(), t.to_string()))
    }

    /// `(kind, target)` by the spec's precedence, or None when nothing matched.
    #[pyo3(signature = (name, user_id=None))]
    fn resolve(
        &self,
        py: Python<'_>,
        name: &str,
        user_id: Option<&str>,
    ) -> PyResult<Option<Py<PyTuple>>> {
        match self.read().resolve(name, user_id) {
            Ok(Lookup::Found(_, t)) => Ok(Some(t.clone_ref(py))),
            Ok(Lookup::Missing { .. }) => Ok(None),
            Err(e) => Err(route_err(py, e)),
        }
    }

    fn names(&self, py: Python<'_>, kind_index: u8) -> PyResult<Vec<String>> {
        Ok(self.read().names(kind(py, kind_index)?))
    }

    /// Close names for an error message, never from another tenant's tools.
    #[pyo3(signature = (name, user_id=None, limit=3))]
    fn suggest(&self, name: &str, user_id: Option<&str>, limit: usize) -> Vec<String> {
        self.read().suggest(name, user_id, limit)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRouteTable>()?;
    Ok(())
}
