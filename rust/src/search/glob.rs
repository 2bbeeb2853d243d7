//! glob: list files matching a gitignore-style glob over the shared walker.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use super::walker::Walker;
use super::SkipStats;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlobSort {
    /// Newest first; ties by path.
    Modified,
    Path,
}

#[derive(Debug, Clone)]
pub struct GlobHit {
    pub path: PathBuf,
    pub display: String,
    pub modified: Option<SystemTime>,
}

#[derive(Debug, Default)]
pub struct GlobOutcome {
    pub files: Vec<GlobHit>,
    pub stats: SkipStats,
}

/// Every file the walker yields (its globs already hold the pattern), sorted.
pub fn run(walker: &Walker, sort: GlobSort) -> GlobOutcome {
    let found = Mutex::new(Vec::new());
    let stats = walker.walk(|| {
        // Per-thread buffer, flushed once when the worker finishes.
        let mut local = LocalHits {
            hits: Vec::new(),
            sink: &found,
        };
        move |dent: &ignore::DirEntry, stats: &mut SkipStats| {
            stats.files += 1;
            let modified = match sort {
                GlobSort::Modified => dent.metadata().ok().and_then(|m| m.modified().ok()),
                GlobSort::Path => None,
            };
            local.hits.push(GlobHit {
                path: dent.path().to_path_buf(),
                display: walker.display(dent.path()),
                modified,
            });
        }
    });
    let mut files = found.into_inner().unwrap_or_else(|e| e.into_inner());
    match sort {
        GlobSort::Path => files.sort_unstable_by(|a, b| super::path_order(&a.path, &b.path)),
        GlobSort::Modified => files.sort_unstable_by(|a, b| {
            b.modified
                .cmp(&a.modified)
                .then_with(|| super::path_order(&a.path, &b.path))
        }),
    }
    GlobOutcome { files, stats }
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
