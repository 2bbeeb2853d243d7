//! Binding for `textsafety::neutralize`: borrows the Python string, copies only when it changes.

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::guard;
use toolroute_textsafety as textsafety;

/// `None` when `text` has nothing to escape (the caller keeps its own object). A string holding
/// lone surrogates cannot be borrowed as UTF-8 and raises `UnicodeEncodeError`.
#[pyfunction]
fn neutralize_text(py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Option<String>> {
    guard(|| {
        let text = text.to_str()?;
        Ok(py.detach(|| textsafety::neutralize(text)))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(neutralize_text, m)?)?;
    // The one wording of a text cut at the output cap, for the Python side too.
    m.add("CUT_NOTICE", toolroute_textsafety::CUT_NOTICE)?;
    Ok(())
}
