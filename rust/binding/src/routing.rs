//! Binding for the routing table (targets are arbitrary Python objects) and its `ToolKind`.

use std::sync::RwLock;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::{guard, ToolRegistrationError};
use toolroute_names::routing::{Kind, Lookup, RoutingTable};

/// Python's `ToolKind`: the routing table's `Kind`, one variant for one.
#[pyclass(
    eq,
    eq_int,
    hash,
    frozen,
    from_py_object,
    module = "toolroute._core",
    name = "ToolKind"
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PyKind {
    #[pyo3(name = "BUILTIN")]
    Builtin = 0,
    #[pyo3(name = "USER_MCP")]
    UserMcp = 1,
    #[pyo3(name = "LOCAL_MCP")]
    LocalMcp = 2,
    #[pyo3(name = "FUNCTION")]
    Function = 3,
    #[pyo3(name = "GLOBAL_MCP")]
    GlobalMcp = 4,
}

impl From<Kind> for PyKind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Builtin => PyKind::Builtin,
            Kind::UserMcp => PyKind::UserMcp,
            Kind::LocalMcp => PyKind::LocalMcp,
            Kind::Function => PyKind::Function,
            Kind::GlobalMcp => PyKind::GlobalMcp,
        }
    }
}

impl From<PyKind> for Kind {
    fn from(kind: PyKind) -> Self {
        match kind {
            PyKind::Builtin => Kind::Builtin,
            PyKind::UserMcp => Kind::UserMcp,
            PyKind::LocalMcp => Kind::LocalMcp,
            PyKind::Function => Kind::Function,
            PyKind::GlobalMcp => Kind::GlobalMcp,
        }
    }
}

#[pymethods]
impl PyKind {
    /// `ToolKind(kind)` or `ToolKind(index)`.
    #[new]
    fn py_new(value: &Bound<'_, PyAny>) -> PyResult<PyKind> {
        guard(|| {
            if let Ok(kind) = value.extract::<PyKind>() {
                return Ok(kind);
            }
            let index: u8 = value.extract()?;
            Ok(Kind::from_index(index).map(PyKind::from).ok_or_else(|| {
                ToolRegistrationError::new_err(format!("unknown tool kind {index}"))
            })?)
        })
    }

    /// The constant's name, e.g. `"BUILTIN"`.
    #[getter(name)]
    fn py_name(&self) -> &'static str {
        Kind::from(*self).constant()
    }

    /// The precedence level, 0 (built-in) to 4 (global MCP).
    #[getter(value)]
    fn py_value(&self) -> u8 {
        *self as u8
    }

    /// The lower-case key traces, audits and listings use, e.g. `"builtin"`.
    #[getter(key)]
    fn py_key(&self) -> &'static str {
        Kind::from(*self).key()
    }

    /// A short human label, e.g. `"built-in"`.
    #[getter(label)]
    fn py_label(&self) -> &'static str {
        Kind::from(*self).label()
    }

    /// Host-defined kinds (built-in, local MCP, function): their names are reserved.
    #[getter(host)]
    fn py_host(&self) -> bool {
        Kind::from(*self).is_host()
    }

    /// Every kind, in precedence order.
    #[staticmethod]
    fn all() -> Vec<PyKind> {
        Kind::ALL.into_iter().map(PyKind::from).collect()
    }

    fn __repr__(&self) -> String {
        format!("ToolKind.{}", Kind::from(*self).constant())
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
        [
            Bound::new(py, PyKind::from(kind))?.into_any(),
            target.into_bound(py),
        ],
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
        kind: PyKind,
        name: &str,
        target: Py<PyAny>,
        replace: bool,
        identity: Option<&str>,
    ) -> PyResult<()> {
        let kind = Kind::from(kind);
        guard(|| {
            let identity =
                identity.map_or_else(|| format!("{}:{name}", kind.constant()), str::to_string);
            let e = entry(py, kind, target)?;
            Ok(self.write().insert(kind, name, &identity, e, replace)?)
        })
    }

    /// Names for a batch of shared newcomers: `items` is `[(identity, [candidate, ...])]`.
    fn plan(&self, kind: PyKind, items: PlanItems) -> PyResult<Vec<Option<String>>> {
        guard(|| Ok(self.write().plan(kind.into(), &items)))
    }

    /// Keys for a batch of `user_id`'s newcomers, in that user's own key namespace.
    fn plan_user(&self, user_id: &str, items: PlanItems) -> PyResult<Vec<Option<String>>> {
        guard(|| Ok(self.write().plan_user(user_id, &items)?))
    }

    /// Route `user_id`'s `key` to `target`; returns the exposed user-form name.
    fn insert_user(
        &self,
        py: Python<'_>,
        user_id: &str,
        key: &str,
        target: Py<PyAny>,
    ) -> PyResult<String> {
        guard(|| {
            let e = entry(py, Kind::UserMcp, target)?;
            Ok(self.write().insert_user(user_id, key, e)?)
        })
    }

    /// Stop routing a shared name; its claim stays, so it never goes to another tool.
    fn remove(&self, name: &str) -> PyResult<bool> {
        guard(|| Ok(self.write().remove(name).is_some()))
    }

    fn remove_user(&self, user_id: &str, key: &str) -> PyResult<bool> {
        guard(|| Ok(self.write().remove_user(user_id, key).is_some()))
    }

    /// Forget `user_id`'s key claims once none of its tools is routed; False while any is.
    fn forget_user(&self, user_id: &str) -> PyResult<bool> {
        guard(|| Ok(self.write().forget_user(user_id)))
    }

    /// `(user_id, key)` of a registered user-form name, else None.
    fn user_entry(&self, name: &str) -> PyResult<Option<(String, String)>> {
        guard(|| {
            Ok(self
                .read()
                .user_entry(name)
                .map(|(u, t)| (u.to_string(), t.to_string())))
        })
    }

    /// `(identity, kind)` holding a shared name (routed or not), else None.
    fn holder(&self, name: &str) -> PyResult<Option<(String, PyKind)>> {
        guard(|| {
            Ok(self
                .read()
                .holder(name)
                .map(|(i, k)| (i.to_string(), k.into())))
        })
    }

    /// `(kind, target)` by the spec's precedence, or None when nothing matched.
    #[pyo3(signature = (name, user_id=None))]
    fn resolve(
        &self,
        py: Python<'_>,
        name: &str,
        user_id: Option<&str>,
    ) -> PyResult<Option<Py<PyTuple>>> {
        guard(|| match self.read().resolve(name, user_id)? {
            Lookup::Found(_, t) => Ok(Some(t.clone_ref(py))),
            Lookup::Missing { .. } => Ok(None),
        })
    }

    fn names(&self, kind: PyKind) -> PyResult<Vec<String>> {
        guard(|| Ok(self.read().names(kind.into())))
    }

    /// Close names for an error message, never from another tenant's tools.
    #[pyo3(signature = (name, user_id=None, limit=3))]
    fn suggest(&self, name: &str, user_id: Option<&str>, limit: usize) -> PyResult<Vec<String>> {
        guard(|| Ok(self.read().suggest(name, user_id, limit)))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyKind>()?;
    m.add_class::<PyRouteTable>()?;
    Ok(())
}
