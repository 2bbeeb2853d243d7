//! The boundary's errors: toolroute's own Python exceptions, declared once here, and one `From`
//! conversion per Rust error type into [`CoreError`], so a binding only writes `?`. And the panic guard every entry
//! point runs behind: a bug that panics in the core is a `ToolExecutionError` (an `Exception`),
//! never a `PanicException`, which derives from `BaseException` and would escape
//! `except Exception`.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;

use toolroute_edits::patch::PatchError;
use toolroute_edits::EditError;
use toolroute_files::ConfineError;
use toolroute_files::FsError;
use toolroute_names::routing::RouteError;
use toolroute_search::SearchError;

// The classes of `toolroute/errors.py`, imported on first use.
pyo3::import_exception!(toolroute.errors, ToolArgumentError);
pyo3::import_exception!(toolroute.errors, ToolExecutionError);
pyo3::import_exception!(toolroute.errors, ToolRegistrationError);
pyo3::import_exception!(toolroute.errors, ToolPreconditionError);
pyo3::import_exception!(toolroute.errors, PathDeniedError);
pyo3::import_exception!(toolroute.errors, PathNotFoundError);
pyo3::import_exception!(toolroute.errors, PathExistsError);
pyo3::import_exception!(toolroute.errors, StaleFileError);

/// A malformed call (the model's arguments, or a caller's): `ToolArgumentError`.
pub fn argument(message: impl Into<String>) -> CoreError {
    CoreError(ToolArgumentError::new_err(message.into()))
}

/// An error on its way to Python: the crates' error types convert into it (Rust's orphan rule
/// keeps `From<TheirError> for PyErr` out of this crate), and it into the `PyErr` it carries.
pub struct CoreError(PyErr);

impl From<CoreError> for PyErr {
    fn from(e: CoreError) -> Self {
        e.0
    }
}

impl From<PyErr> for CoreError {
    fn from(e: PyErr) -> Self {
        Self(e)
    }
}

/// What an entry point's body returns inside [`guard`].
pub type CoreResult<T> = Result<T, CoreError>;

impl From<ConfineError> for CoreError {
    fn from(e: ConfineError) -> Self {
        Self(PathDeniedError::new_err(e.to_string()))
    }
}

/// A refused path is denied; a failing file system is an execution error; the rest (no such
/// file and already exists (each its own subclass), too large, refused) are preconditions the caller can fix.
fn fs_exception(e: &FsError, message: String) -> PyErr {
    match e {
        FsError::Denied(_) => PathDeniedError::new_err(message),
        FsError::NotFound { .. } => PathNotFoundError::new_err(message),
        FsError::Exists { .. } => PathExistsError::new_err(message),
        FsError::Stale { .. } => StaleFileError::new_err(message),
        FsError::Io { .. } => ToolExecutionError::new_err(message),
        _ => ToolPreconditionError::new_err(message),
    }
}

impl From<FsError> for CoreError {
    fn from(e: FsError) -> Self {
        Self(fs_exception(&e, e.to_string()))
    }
}

/// An edit whose strings are fine but do not fit the file is a failed precondition, not a
/// malformed call; `context` names the file when there is one (`"edit notes.md: "`).
pub fn edit_error(context: &str, e: EditError) -> CoreError {
    let message = format!("{context}{e}");
    CoreError(match e {
        EditError::EmptyOld | EditError::Identical => ToolArgumentError::new_err(message),
        _ => ToolPreconditionError::new_err(message),
    })
}

impl From<PatchError> for CoreError {
    fn from(e: PatchError) -> Self {
        let message = e.to_string();
        Self(match &e {
            // The file error's class, with the patch's fuller message.
            PatchError::File { source, .. } | PatchError::Commit { source, .. } => {
                fs_exception(source, message)
            }
            PatchError::Mismatch { .. } => ToolPreconditionError::new_err(message),
            _ => ToolArgumentError::new_err(message),
        })
    }
}

impl From<SearchError> for CoreError {
    fn from(e: SearchError) -> Self {
        match e {
            SearchError::Confine(c) => c.into(),
            other => Self(ToolArgumentError::new_err(other.to_string())),
        }
    }
}

impl From<RouteError> for CoreError {
    fn from(e: RouteError) -> Self {
        Self(match e {
            RouteError::UserId(_) => ToolArgumentError::new_err(e.to_string()),
            _ => ToolRegistrationError::new_err(e.to_string()),
        })
    }
}

/// Set to `1` in a test process's environment, `_core` gains `_force_panics(on)`, which makes
/// every guarded entry point panic, so a test can check that each one surfaces the panic as a
/// toolroute exception. Without it the switch cannot be reached.
pub const TEST_HOOKS_VAR: &str = "TOOLROUTE_CORE_TEST_HOOKS";

static FORCE_PANICS: AtomicBool = AtomicBool::new(false);

/// The test hook (only registered under [`TEST_HOOKS_VAR`]).
#[pyfunction]
fn _force_panics(on: bool) {
    FORCE_PANICS.store(on, Ordering::Relaxed);
}

pub fn register_test_hooks(m: &Bound<'_, PyModule>) -> PyResult<()> {
    if std::env::var_os(TEST_HOOKS_VAR).is_some_and(|v| v == "1") {
        m.add_function(wrap_pyfunction!(_force_panics, m)?)?;
    }
    Ok(())
}

/// Run one entry point's body, turning a panic into a `ToolExecutionError`.
pub fn guard<T>(f: impl FnOnce() -> CoreResult<T>) -> PyResult<T> {
    let body = || {
        if FORCE_PANICS.load(Ordering::Relaxed) {
            panic!("forced by the test hook");
        }
        f()
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(result) => Ok(result?),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(ToolExecutionError::new_err(format!(
                "internal error in toolroute's core: {what}"
            )))
        }
    }
}
