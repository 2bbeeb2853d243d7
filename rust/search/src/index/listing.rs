//! glob from the index: the replayed walk's file list, without listing a folder.

use super::live::Index;
use crate::glob::{self, GlobHit, GlobOutcome, GlobSort};
use crate::walker::Walker;

/// The files `walker` would yield, in `sort` order; `None` when the index cannot answer.
pub(crate) fn glob(index: &Index, walker: &Walker, sort: GlobSort) -> Option<GlobOutcome> {
    let (paths, stats) = {
        let state = index.fresh()?;
        state.list(walker)?
    };
    let (start, _) = walker.start();
    let root = walker.root();
    let files = paths
        .iter()
        .map(|path| GlobHit {
            display: walker.shown(path.strip_prefix(start).unwrap_or(path)),
            modified: match sort {
                GlobSort::Modified => Walker::modified_beneath(&root, path),
                GlobSort::Path => None,
            },
        })
        .collect();
    index
        .served
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Some(glob::sorted(files, sort, stats))
}
