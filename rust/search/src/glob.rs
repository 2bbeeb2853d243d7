//! glob: list files matching a gitignore-style glob over the shared walker.

use std::sync::Mutex;
use std::time::SystemTime;

use super::walker::{Found, PerFile, Walker};
use super::SkipStats;

/// How glob orders its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlobSort {
    /// Newest first; ties by path.
    Modified,
    /// By path.
    Path,
}

/// One file glob found.
#[derive(Debug, Clone)]
pub struct GlobHit {
    /// Workspace-relative (absolute under a read-only root): every hit of one walk shares the
    /// start path's prefix, so ordering by this text orders by path.
    pub display: String,
    /// Its modification time, when sorting by it.
    pub modified: Option<SystemTime>,
}

/// What a glob found.
#[derive(Debug, Default)]
pub struct GlobOutcome {
    /// The files, in the asked order.
    pub files: Vec<GlobHit>,
    /// What the walk left out.
    pub stats: SkipStats,
}

/// Every file the walker yields (its globs already hold the pattern), sorted.
pub fn run(walker: &Walker, sort: GlobSort) -> GlobOutcome {
    let found = Mutex::new(Vec::new());
    let stats = walker.walk(PerFile::Cheap, || {
        // Per-thread buffer, flushed once when the worker finishes.
        let mut local = LocalHits {
            hits: Vec::new(),
            sink: &found,
        };
        move |dent: &Found<'_>, stats: &mut SkipStats| {
            stats.files += 1;
            let modified = match sort {
                GlobSort::Modified => dent.modified(),
                GlobSort::Path => None,
            };
            local.hits.push(GlobHit {
                display: dent.display(),
                modified,
            });
        }
    });
    let files = found.into_inner().unwrap_or_else(|e| e.into_inner());
    sorted(files, sort, stats)
}

/// The outcome with `files` in the requested order.
pub(crate) fn sorted(mut files: Vec<GlobHit>, sort: GlobSort, stats: SkipStats) -> GlobOutcome {
    match sort {
        GlobSort::Path => files.sort_unstable_by(by_display),
        GlobSort::Modified => files
            .sort_unstable_by(|a, b| b.modified.cmp(&a.modified).then_with(|| by_display(a, b))),
    }
    GlobOutcome { files, stats }
}

fn by_display(a: &GlobHit, b: &GlobHit) -> std::cmp::Ordering {
    super::bytes_order(a.display.as_bytes(), b.display.as_bytes())
}

struct LocalHits<'a> {
    hits: Vec<GlobHit>,
    sink: &'a Mutex<Vec<GlobHit>>,
}

impl Drop for LocalHits<'_> {
    fn drop(&mut self) {
        let mut all = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        all.append(&mut self.hits);
    }
}
