//! Bindings for name sanitisation and the user-form encoding.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyList, PyString};

use crate::errors::{argument, guard};
use toolroute_names::naming;

#[pyfunction]
fn generate_api_function_name(service: &str, tool: &str) -> PyResult<String> {
    guard(|| Ok(naming::generate_api_function_name(service, tool)))
}

/// Sanitise many (service, tool) pairs in one crossing, borrowing the strings (no copies in).
#[pyfunction]
fn generate_api_function_names<'py>(
    py: Python<'py>,
    pairs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    guard(|| {
        let mut names = Vec::with_capacity(pairs.len().unwrap_or(0));
        for item in pairs.try_iter()? {
            let (service, tool): (PyBackedStr, PyBackedStr) = item?
                .extract()
                .map_err(|_| argument("expected an iterable of (service, tool) string pairs"))?;
            names.push(naming::generate_api_function_name(&service, &tool));
        }
        Ok(PyList::new(py, names)?)
    })
}

#[pyfunction]
fn sanitize_tool_name(raw: &str) -> PyResult<String> {
    guard(|| Ok(naming::sanitize(raw)))
}

#[pyfunction]
fn is_valid_tool_name(name: &str) -> PyResult<bool> {
    guard(|| Ok(naming::is_valid_tool_name(name)))
}

/// `name` cut to fit with a `_` + 8-hex hash of `raw`: the collision-breaking form.
#[pyfunction]
fn with_hash_suffix(name: &str, raw: &str) -> PyResult<String> {
    guard(|| Ok(naming::with_hash_suffix(name, raw)))
}

#[pyfunction]
fn encode_user_tool(user_id: &str, tool: &str) -> PyResult<String> {
    guard(|| naming::encode_user_tool(user_id, tool).map_err(|e| argument(e.to_string())))
}

/// Any Python object: a non-string, or a string that is not valid Unicode (a lone surrogate),
/// is refused like a bad id, never with a raw TypeError or UnicodeEncodeError.
#[pyfunction]
fn validate_user_id(user_id: &Bound<'_, PyAny>) -> PyResult<()> {
    guard(|| {
        let Ok(text) = user_id.cast::<PyString>() else {
            let kind = user_id.get_type().name()?;
            return Err(argument(format!(
                "user id must be a string, not {kind}; {}",
                naming::USER_ID_RULE
            )));
        };
        let Ok(id) = text.to_str() else {
            return Err(argument(format!(
                "user id is not valid Unicode (a lone surrogate); {}",
                naming::USER_ID_RULE
            )));
        };
        naming::validate_user_id(id).map_err(|e| argument(e.to_string()))
    })
}

#[pyfunction]
fn has_user_form(name: &str) -> PyResult<bool> {
    guard(|| Ok(naming::has_user_form(name)))
}

/// `(user_id, tool)` of a readable-form user name; None for the digest form or no user form.
#[pyfunction]
fn decode_user_tool(name: &str) -> PyResult<Option<(String, String)>> {
    guard(|| {
        Ok(match naming::decode_user_tool(name) {
            Some(naming::UserForm::Readable { user_id, tool }) => {
                Some((user_id.to_string(), tool.to_string()))
            }
            Some(naming::UserForm::Digest { .. }) | None => None,
        })
    })
}

/// Which of `user_ids` may own the user-form `name` (by its grammar; the table decides).
#[pyfunction]
fn user_tool_owners(name: &str, user_ids: Vec<String>) -> PyResult<Vec<String>> {
    guard(|| {
        let Some(form) = naming::decode_user_tool(name) else {
            return Ok(Vec::new());
        };
        Ok(user_ids
            .into_iter()
            .filter(|uid| match &form {
                naming::UserForm::Readable { user_id, .. } => uid == user_id,
                naming::UserForm::Digest { user_hint } => naming::matches_user_hint(uid, user_hint),
            })
            .collect())
    })
}

#[pyfunction]
fn user_service_key(user_id: &str, service_id: &str) -> PyResult<String> {
    guard(|| naming::user_service_key(user_id, service_id).map_err(|e| argument(e.to_string())))
}

/// Every (user id, service id) split of a `user_{userId}_service_{serviceId}` key.
#[pyfunction]
#[pyo3(signature = (key, user_id=None))]
fn user_service_candidates(key: &str, user_id: Option<&str>) -> PyResult<Vec<(String, String)>> {
    guard(|| {
        Ok(naming::user_service_candidates(key, user_id)
            .into_iter()
            .map(|(u, s)| (u.to_string(), s.to_string()))
            .collect())
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(generate_api_function_name, m)?)?;
    m.add_function(wrap_pyfunction!(generate_api_function_names, m)?)?;
    m.add_function(wrap_pyfunction!(sanitize_tool_name, m)?)?;
    m.add_function(wrap_pyfunction!(is_valid_tool_name, m)?)?;
    m.add_function(wrap_pyfunction!(with_hash_suffix, m)?)?;
    m.add_function(wrap_pyfunction!(encode_user_tool, m)?)?;
    m.add_function(wrap_pyfunction!(validate_user_id, m)?)?;
    m.add_function(wrap_pyfunction!(has_user_form, m)?)?;
    m.add_function(wrap_pyfunction!(decode_user_tool, m)?)?;
    m.add_function(wrap_pyfunction!(user_tool_owners, m)?)?;
    m.add_function(wrap_pyfunction!(user_service_key, m)?)?;
    m.add_function(wrap_pyfunction!(user_service_candidates, m)?)?;
    // The rule as messages state it: tests and callers match it, not a copy of its wording.
    m.add("USER_ID_RULE", naming::USER_ID_RULE)?;
    Ok(())
}
