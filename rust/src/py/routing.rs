//! Binding for the routing table (targets are arbitrary Python objects) and its `ToolKind`.

use std::sync::RwLock;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::errors::{raise, route_err};
use crate::routing::{Kind, Lookup, RoutingTable};

#[pymethods]
impl Kind {
    /// `ToolKind(kind)` or `ToolKind(index)`.
    #[new]
    fn py_new(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Kind> {
        if let Ok(kind) = value.extract::<Kind>() {
            return Ok(kind);
        }
        let index: u8 = value.extract()?;
        Kind::from_index(index).ok_or_else(|| {
            raise(
                py,
                "ToolRegistrationError",
                format!("unknown tool kind {index}"),
            )
        })
    }

    /// The constant's name, e.g. `"BUILTIN"`.
    #[getter(name)]
    fn py_name(&self) -> &'static str {
        self.constant()
    }

    /// The precedence level, 0 (built-in) to 4 (global MCP).
    #[getter(value)]
    fn py_value(&self) -> u8 {
        *self as u8
    }

    /// A short human label, e.g. `"built-in"`.
    #[getter(label)]
    fn py_label(&self) -> &'static str {
        self.label()
    }

    /// Host-defined kinds (built-in, local MCP, function): their names are reserved.
    #[getter(host)]
    fn py_host(&self) -> bool {
        self.is_host()
    }

    /// Every kind, in precedence order.
    #[staticmethod]
    fn all() -> Vec<Kind> {
        Kind::ALL.to_vec()
    }

    fn __repr__(&self) -> String {
        format!("ToolKind.{}", self.constant())
    }
}

type Table = RoutingTable<Py<PyTuple>>;
type PlanItems = Vec<(String, Vec<String>)>;

/// Each entry stores a ready `(kind, target)` tuple so a lookup allocates nothing.
#[pyclass(frozen, name = "RouteTable", module = "toolroute._core")]
pub struct PyRouteTable {
    table: RwLock<Table>,
}

impl PyRouteTable {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(|p| p.into_inner())
    }
}

fn entry(py: Python<'_>, kind: Kind, target: Py<PyAny>) -> PyResult<Py<PyTuple>> {
    Ok(PyTuple::new(
        py,
        [Bound::new(py, kind)?.into_any(), target.into_bound(py)],
    )?
    .unbind())
}

#[pymethods]
impl PyRouteTable {
    #[new]
    fn new() -> Self {
        Self {
            table: RwLock::new(RoutingTable::new()),
        }
    }

    /// Route `name` to a shared tool of `kind`, claiming the name for `identity` (default
    /// `"{KIND}:{name}"`) for the table's life.
    #[pyo3(signature = (kind, name, target, replace=false, identity=None))]
    fn insert(
        &self,
        py: Python<'_>,
        kind: Kind,
        name: &str,
        target: Py<PyAny>,
        replace: bool,
        identity: Option<&str>,
    ) -> PyResult<()> {
        let identity =
            identity.map_or_else(|| format!("{}:{name}", kind.constant()), str::to_string);
        let e = entry(py, kind, target)?;
        self.write()
            .insert(kind, name, &identity, e, replace)
            .map_err(|e| route_err(py, e))
    }

    /// Names for a batch of shared newcomers: `items` is `[(identity, [candidate, ...])]`.
    fn plan(&self, kind: Kind, items: PlanItems) -> Vec<Option<String>> {
        self.write().plan(kind, &items)
    }

    /// Keys for a batch of `user_id`'s newcomers, in that user's own key namespace.
    fn plan_user(
        &self,
        py: Python<'_>,
        user_id: &str,
        items: PlanItems,
    ) -> PyResult<Vec<Option<String>>> {
        self.write()
            .plan_user(user_id, &items)
            .map_err(|e| route_err(py, e))
    }

    /// Route `user_id`'s `key` to `target`; returns the exposed user-form name.
    fn insert_user(
        &self,
        py: Python<'_>,
        user_id: &str,
        key: &str,
        target: Py<PyAny>,
    ) -> PyResult<String> {
        let e = entry(py, Kind::UserMcp, target)?;
        self.write()
            .insert_user(user_id, key, e)
            .map_err(|e| route_err(py, e))
    }

    /// Stop routing a shared name; its claim stays, so it never goes to another tool.
    fn remove(&self, name: &str) -> bool {
        self.write().remove(name).is_some()
    }

    fn remove_user(&self, user_id: &str, key: &str) -> bool {
        self.write().remove_user(user_id, key).is_some()
    }

    /// `(user_id, key)` of a registered user-form name, else None.
    fn user_entry(&self, name: &str) -> Option<(String, String)> {
        self.read()
            .user_entry(name)
            .map(|(u, t)| (u.to_string(), t.to_string()))
    }

    /// `(identity, kind)` holding a shared name (routed or not), else None.
    fn holder(&self, name: &str) -> Option<(String, Kind)> {
        self.read().holder(name).map(|(i, k)| (i.to_string(), k))
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

    fn names(&self, kind: Kind) -> Vec<String> {
        self.read().names(kind)
    }

    /// Close names for an error message, never from another tenant's tools.
    #[pyo3(signature = (name, user_id=None, limit=3))]
    fn suggest(&self, name: &str, user_id: Option<&str>, limit: usize) -> Vec<String> {
        self.read().suggest(name, user_id, limit)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Kind>()?;
    m.add_class::<PyRouteTable>()?;
    Ok(())
}
