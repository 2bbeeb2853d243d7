//! The file layer's errors: a path the roots refuse (`ConfineError`), and the file helpers' one
//! error type (`FsError`: a refused path, or a file-system problem), each naming the path as the
//! caller gave it. Below every file module, so none of them imports another's error.

use std::io;
use std::path::PathBuf;

use crate::text_style::StyleError;

/// Why a path is refused, or a root cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("{path:?} resolves to {resolved:?}, which is outside the allowed roots ({roots})")]
    Outside {
        path: String,
        resolved: PathBuf,
        roots: String,
    },
    #[error("{path:?} resolves to {resolved:?}, inside the read-only root {root:?}; writes are only allowed under the workspace root {workspace:?}")]
    ReadOnly {
        path: String,
        resolved: PathBuf,
        root: PathBuf,
        workspace: PathBuf,
    },
    #[error("root {root:?} cannot be used: {source}")]
    BadRoot { root: PathBuf, source: io::Error },
    #[error("cannot resolve {path:?}: {source}")]
    Io { path: String, source: io::Error },
    #[error("path must not be empty")]
    Empty,
    #[error("path {0:?} contains a NUL byte")]
    Nul(String),
}

/// Failures of the confined file helpers: a refused path, or a file-system problem.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error(transparent)]
    Denied(#[from] ConfineError),
    #[error("{path}: no such file")]
    NotFound { path: String },
    #[error("{path} is a directory, not a file")]
    IsDir { path: String },
    #[error("{path} is {size} bytes, over the {limit}-byte limit for this tool")]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error(
        "{path} already exists (mode \"create\" never overwrites; use \"overwrite\" or \"append\")"
    )]
    Exists { path: String },
    /// The file is there but toolroute will not change it this way (the reason says why).
    #[error("{path}: {reason}")]
    Refused { path: String, reason: String },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        source: io::Error,
    },
}

impl FsError {
    pub fn io(action: &'static str, path: &str, source: io::Error) -> Self {
        FsError::Io {
            action,
            path: path.to_string(),
            source,
        }
    }

    /// Like [`FsError::io`], but a missing file or a folder get their own variants.
    pub fn from_io(action: &'static str, path: &str, source: io::Error) -> Self {
        match source.raw_os_error() {
            Some(libc::ENOENT) => FsError::NotFound {
                path: path.to_string(),
            },
            Some(libc::EISDIR) => FsError::IsDir {
                path: path.to_string(),
            },
            _ => FsError::io(action, path, source),
        }
    }

    pub(crate) fn refused(path: &str, reason: impl Into<String>) -> Self {
        FsError::Refused {
            path: path.to_string(),
            reason: reason.into(),
        }
    }
}

impl From<(&str, StyleError)> for FsError {
    fn from((path, e): (&str, StyleError)) -> Self {
        FsError::refused(path, e.to_string())
    }
}
