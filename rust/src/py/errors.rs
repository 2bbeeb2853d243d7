//! Map Rust errors to toolroute's own Python exceptions (never a `PanicException`).

use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::confine::ConfineError;
use crate::routing::RouteError;

/// Build an instance of `toolroute.errors.<class>` with `message`.
pub fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
    let made = py
        .import("toolroute.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from))
        .and_then(|c| c.call1((message,)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

pub fn confine_err(py: Python<'_>, e: ConfineError) -> PyErr {
    raise(py, "PathDeniedError", e.to_string())
}

pub fn route_err(py: Python<'_>, e: RouteError) -> PyErr {
    let class = match e {
        RouteError::UserId(_) => "ToolArgumentError",
        _ => "ToolRegistrationError",
    };
    raise(py, class, e.to_string())
}
