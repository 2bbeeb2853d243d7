//! An indexed grep: the walk is replayed from the index, files that cannot match are left out,
//! and the real searcher runs on the rest, so the outcome (skip counts included) is the one an
//! unindexed run gives.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::live::Index;
use super::plan::plan;
use crate::search::grep::{Grep, GrepOutcome};
use crate::search::walker::Walker;
use crate::search::SkipStats;

/// Below this many files to search, threads cost more than they save.
const PARALLEL_FROM: usize = 16;

/// Search with the index; `None` when it cannot answer this query (the caller scans).
pub(crate) fn grep(
    index: &Index,
    grep: &Grep,
    pattern: &str,
    walker: &Walker,
) -> Option<GrepOutcome> {
    let opts = grep.options();
    if opts.text {
        return None;
    }
    let query = plan(pattern, opts);
    let (todo, mut stats) = {
        let state = index.fresh()?;
        state.select(walker, &query, opts.multiline)?
    };
    let collector = grep.collector();
    let (start, _) = walker.start();
    let root = walker.root();
    let next = AtomicUsize::new(0);
    let total = Mutex::new(SkipStats::default());
    let work = || {
        let mut searcher = grep.searcher();
        let mut local = SkipStats::default();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(path) = todo.get(i) else { break };
            let name = || shown(walker, start, path);
            let opened = Walker::reopen(&root, path, false);
            grep.visit(&mut searcher, opened, &name, &mut local, &collector);
        }
        total
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .merge(&local);
    };
    let threads = if todo.len() < PARALLEL_FROM {
        1
    } else {
        walker.threads()
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });
    stats.merge(&total.into_inner().unwrap_or_else(|e| e.into_inner()));
    index.served.fetch_add(1, Ordering::Relaxed);
    Some(grep.finish(collector, stats, root))
}

fn shown(walker: &Walker, start: &Path, path: &Path) -> (PathBuf, String) {
    let rel = path.strip_prefix(start).unwrap_or(path);
    (path.to_path_buf(), walker.shown(rel))
}
