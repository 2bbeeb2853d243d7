//! Bindings for name sanitisation and the user-form encoding.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyList;

use super::errors::{guard, raise};
use crate::naming;

#[pyfunction]
fn generate_api_function_name(py: Python<'_>, service: &str, tool: &str) -> PyResult<String> {
    guard(py, || Ok(naming::generate_api_function_name(service, tool)))
}

/// Sanitise many (service, tool) pairs in one crossing, borrowing the strings (no copies in).
#[pyfunction]
fn generate_api_function_names<'py>(
    py: Python<'py>,
    pairs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let mut names = Vec::with_capacity(pairs.len().unwrap_or(0));
    for item in pairs.try_iter()? {
        let (service, tool): (PyBackedStr, PyBackedStr) = item?.extract().map_err(|_| {
            raise(
                py,
                "ToolArgumentError",
                "expected an iterable of (service, tool) string pairs".to_string(),
            )
        })?;
        names.push(guard(py, || {
            Ok(naming::generate_api_function_name(&service, &tool))
        })?);
    }
    PyList::new(py, names)
}

#[pyfunction]
fn sanitize_tool_name(py: Python<'_>, raw: &str) -> PyResult<String> {
    guard(py, || Ok(naming::sanitize(raw)))
}

#[pyfunction]
fn is_valid_tool_name(name: &str) -> bool {
    naming::is_valid_tool_name(name)
}

#[pyfunction]
fn short_hash(raw: &str) -> String {
    naming::short_hash(raw)
}

/// `name` cut to fit with a `_` + 8-hex hash of `raw`: the collision-breaking form.
#[pyfunction]
fn with_hash_suffix(py: Python<'_>, name: &str, raw: &str) -> PyResult<String> {
    guard(py, || Ok(naming::with_hash_suffix(name, raw)))
}

#[pyfunction]
fn encode_user_tool(py: Python<'_>, user_id: &str, tool: &str) -> PyResult<String> {
    naming::encode_user_tool(user_id, tool)
        .map_err(|e| raise(py, "ToolArgumentError", e.to_string()))
}

#[pyfunction]
fn validate_user_id(py: Python<'_>, user_id: &str) -> PyResult<()> {
    naming::validate_user_id(user_id).map_err(|e| raise(py, "ToolArgumentError", e.to_string()))
}

#[pyfunction]
fn has_user_form(name: &str) -> bool {
    naming::has_user_form(name)
}

/// Every (user id, tool) split of a user-form name (more than one when a user id has `_tool_`).
#[pyfunction]
fn user_form_candidates(name: &str) -> Vec<(String, String)> {
    naming::user_form_candidates(name)
        .into_iter()
        .map(|(u, t)| (u.to_string(), t.to_string()))
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(generate_api_function_name, m)?)?;
    m.add_function(wrap_pyfunction!(generate_api_function_names, m)?)?;
    m.add_function(wrap_pyfunction!(sanitize_tool_name, m)?)?;
    m.add_function(wrap_pyfunction!(is_valid_tool_name, m)?)?;
    m.add_function(wrap_pyfunction!(short_hash, m)?)?;
    m.add_function(wrap_pyfunction!(with_hash_suffix, m)?)?;
    m.add_function(wrap_pyfunction!(encode_user_tool, m)?)?;
    m.add_function(wrap_pyfunction!(validate_user_id, m)?)?;
    m.add_function(wrap_pyfunction!(has_user_form, m)?)?;
    m.add_function(wrap_pyfunction!(user_form_candidates, m)?)?;
    Ok(())
}
