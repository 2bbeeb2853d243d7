//! The PyO3 layer: argument conversion and error mapping only; logic lives in the plain modules.

mod errors;
mod files;
mod naming;
mod routing;
mod search;
mod textsafety;
mod toolsearch;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    naming::register(m)?;
    routing::register(m)?;
    files::register(m)?;
    search::register(m)?;
    textsafety::register(m)?;
    toolsearch::register(m)?;
    errors::register_test_hooks(m)?;
    // Built without the Linux-only interfaces (another OS, or the `portable` feature): the
    // Python side then takes its portable paths too, so one switch tests what a Mac runs.
    m.add("PORTABLE", !cfg!(native_linux))?;
    Ok(())
}
