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

/// Safety net: a bug that panics in the core becomes a `ToolExecutionError` (an `Exception`),
/// never a `PanicException`, which derives from `BaseException` and would escape `except Exception`.
pub fn guard<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(raise(
                py,
                "ToolExecutionError",
                format!("internal error in toolroute's core: {what}"),
            ))
        }
    }
}
