//! The file layer's errors: a path the roots refuse (`ConfineError`), and the file helpers' one
//! error type (`FsError`: a refused path, or a file-system problem), each naming the path as the
//! caller gave it. Below every file module, so none of them imports another's error.

use std::io;
use std::path::PathBuf;

use crate::text_style::StyleError;

/// Why a path is refused, or a root cannot be used. `path` is always the path as the caller gave
/// it; `resolved`, where it resolved to.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The path resolves outside every root.
    #[error("{path:?} resolves to {resolved:?}, which is outside the allowed roots ({roots})")]
    Outside {
        /// The path as given.
        path: String,
        /// Where it resolves.
        resolved: PathBuf,
        /// The roots, as a message lists them.
        roots: String,
    },
    /// A write to a path under a read-only root.
    #[error("{path:?} resolves to {resolved:?}, inside the read-only root {root:?}; writes are only allowed under the workspace root {workspace:?}")]
    ReadOnly {
        /// The path as given.
        path: String,
        /// Where it resolves.
        resolved: PathBuf,
        /// The read-only root it is under.
        root: PathBuf,
        /// The workspace root, where writes go.
        workspace: PathBuf,
    },
    /// A root that cannot be opened or is not a folder.
    #[error("root {root:?} cannot be used: {source}")]
    BadRoot {
        /// The root.
        root: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The path could not be resolved.
    #[error("cannot resolve {path:?}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// An empty path.
    #[error("path must not be empty")]
    Empty,
    /// A path with a NUL byte (which no system call takes).
    #[error("path {0:?} contains a NUL byte")]
    Nul(String),
}

/// Failures of the confined file helpers: a refused path, or a file-system problem. `path` is
/// always the path as the caller gave it.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The roots refuse the path.
    #[error(transparent)]
    Denied(#[from] ConfineError),
    /// Nothing is there.
    #[error("{path}: no such file")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A folder where a file was expected.
    #[error("{path} is a directory, not a file")]
    IsDir {
        /// The path as given.
        path: String,
    },
    /// A file over the tool's size limit.
    #[error("{path} is {size} bytes, over the {limit}-byte limit for this tool")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// A create over an existing file.
    #[error(
        "{path} already exists (mode \"create\" never overwrites; use \"overwrite\" or \"append\")"
    )]
    Exists {
        /// The path as given.
        path: String,
    },
    /// The file is there but toolroute will not change it this way (the reason says why).
    #[error("{path}: {reason}")]
    Refused {
        /// The path as given.
        path: String,
        /// Why, as the model reads it.
        reason: String,
    },
    /// The stale-read guard refused a rewrite (the reason says why).
    #[error(
        "{path} was not changed: {reason}; read it again (read_file) and redo the change on \
             what it holds now"
    )]
    Stale {
        /// The path as given.
        path: String,
        /// Why, as the model reads it.
        reason: String,
    },
    /// The file system failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done, e.g. `"read"`.
        action: &'static str,
        /// The path as given.
        path: String,
        /// The system's error.
        source: io::Error,
    },
}

impl FsError {
    /// An [`FsError::Io`] for `action` on `path`.
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
