//! `toolroute._core`: the PyO3 layer over toolroute's Rust crates, and the only crate that links
//! PyO3. Argument conversion and error mapping only; the logic lives in the crates below it.

mod checkpoints;
mod errors;
mod files;
mod naming;
mod routing;
mod search;
mod textsafety;
mod toolsearch;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    naming::register(m)?;
    routing::register(m)?;
    files::register(m)?;
    checkpoints::register(m)?;
    search::register(m)?;
    textsafety::register(m)?;
    toolsearch::register(m)?;
    errors::register_test_hooks(m)?;
    // Built without the Linux-only interfaces (another OS, or the `portable` feature): the
    // Python side then takes its portable paths too, so one switch tests what a Mac runs.
    m.add("PORTABLE", !toolroute_files::NATIVE_LINUX)?;
    Ok(())
}
