//! What a change means for the index: told by the watch as it happens, or found by `validate.rs`
//! where there is no watch.

use std::path::PathBuf;

/// What a change means for the index.
#[derive(Debug)]
pub(crate) enum Mark {
    /// Re-list this directory (root-relative) and what is below it.
    #[cfg_attr(any(not(target_os = "linux"), feature = "portable"), allow(dead_code))]
    // only the watch relists a whole subtree
    Relist(PathBuf),
    /// Re-list this directory's own entries (new subfolders are walked whole).
    Entries(PathBuf),
    /// This file's content may have changed: search it from disk until it is re-read.
    Dirty(PathBuf),
    /// The index can no longer be trusted (ignore rules changed, the root moved).
    Broken(String),
    /// Events were lost (queue overflow, read error): only checking every file can tell what
    /// changed.
    Lost,
}
