//! toolroute's Rust core. Plain Rust modules hold the logic (each with its own `cargo test`s);
//! `py` is the thin PyO3 layer that exposes them as `toolroute._core`.

pub mod digest;
pub mod edits;
pub mod files;
pub mod naming;
pub mod patch;
pub mod routing;
pub mod search;
pub mod textsafety;
pub mod toolsearch;

mod py;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::register(m)
}
