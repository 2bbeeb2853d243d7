//! What names one index: its root and the walk options it was built with, and a folder's
//! identity. Shared by the live index, its registry and its cache on disk, below all three.

use std::path::PathBuf;

use super::build;
use crate::walker::WalkOptions;

/// What an index is keyed by: the canonical root and the walk settings that change the file set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) root: PathBuf,
    pub(crate) hidden: bool,
    pub(crate) no_ignore: bool,
    pub(crate) require_git: bool,
}

impl Key {
    pub(crate) fn walk_options(&self) -> WalkOptions {
        build::walk_options(self.hidden, self.no_ignore, self.require_git)
    }
}

/// A folder's device and inode.
#[allow(clippy::useless_conversion, clippy::unnecessary_cast)] // st_dev is i32 on macOS
pub(crate) fn ident(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}
