//! An indexed grep: the walk is replayed from the index, files that cannot match are left out,
//! and the real searcher runs on the rest, so the outcome (skip counts included) is the one an
//! unindexed run gives.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::build::{self, Ident};
use super::live::Index;
use super::plan::plan;
use super::texts;
use crate::grep::{FileHits, Grep, GrepOutcome, Source};
use crate::walker::Walker;
use crate::SkipStats;

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
    let (todo, mut stats, seen) = {
        let state = index.fresh()?;
        let (todo, stats) = state.select(walker, &query, opts.multiline)?;
        (todo, stats, state.seq)
    };
    let collector = grep.collector();
    let (start, _) = walker.start();
    let root = walker.root();
    let next = AtomicUsize::new(0);
    let total = Mutex::new(SkipStats::default());
    let learned = Mutex::new(Vec::new());
    let ordered: Mutex<Vec<(usize, FileHits)>> = Mutex::new(Vec::new());
    let keep = texts::enabled();
    let work = || {
        let mut scanner = grep.scanner();
        let mut local = SkipStats::default();
        let mut read = Vec::new();
        let mut found: Vec<(usize, FileHits)> = Vec::new();
        let mut held: Vec<FileHits> = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some((pick, path, kept)) = todo.get(i) else {
                break;
            };
            let name = |keep: bool| shown(walker, start, path, keep);
            if let Some(text) = kept {
                grep.visit(
                    &mut scanner,
                    Ok(Source::Text(text)),
                    &name,
                    &mut local,
                    &collector,
                    Some(&mut held),
                );
            } else {
                let opened = Walker::reopen(&root, path, false);
                let whole = match (&opened, pick.trusted) {
                    (Ok(file), Some((_, ident))) if keep => read_known(file, ident),
                    _ => None,
                };
                match (whole, pick.trusted) {
                    (Some(text), Some((id, _))) => {
                        grep.visit(
                            &mut scanner,
                            Ok(Source::Bytes(&text)),
                            &name,
                            &mut local,
                            &collector,
                            Some(&mut held),
                        );
                        if texts::keepable(&text) {
                            read.push((id, text));
                        }
                    }
                    _ => grep.visit(
                        &mut scanner,
                        opened.map(Source::File),
                        &name,
                        &mut local,
                        &collector,
                        Some(&mut held),
                    ),
                }
            }
            found.extend(held.drain(..).map(|hits| (i, hits)));
        }
        lock(&ordered).extend(found);
        total
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .merge(&local);
        if !read.is_empty() {
            learned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(read);
        }
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
    index.keep_texts(
        seen,
        learned.into_inner().unwrap_or_else(|e| e.into_inner()),
    );
    index.served.fetch_add(1, Ordering::Relaxed);
    // Picks come in the order results are shown (the replay merges each folder's names in path
    // order), so ordering the hits by pick is ordering them by path; `finish` checks it.
    let mut ordered = ordered.into_inner().unwrap_or_else(|e| e.into_inner());
    // One sorted run per worker: the stable sort finds the runs and merges them.
    ordered.sort_by_key(|(i, _)| *i);
    collector.add(ordered.into_iter().map(|(_, hits)| hits).collect());
    Some(grep.finish(collector, stats, root))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The whole text of an open file, when it is still the one the index read (same inode, size
/// and change time) and small enough to keep; `None` leaves the file to be searched from disk
/// (read by position, so the file's own offset is still at its start).
fn read_known(file: &File, ident: Ident) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let meta = file.metadata().ok()?;
    if build::ident_of(&meta) != ident || ident.1 > texts::MAX_TEXT {
        return None;
    }
    let size = ident.1 as usize;
    // One byte more than the size: a file that grew since the stat is not the one indexed.
    let mut text = vec![0; size + 1];
    let mut got = 0;
    while got < text.len() {
        match file.read_at(&mut text[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    text.truncate(size);
    (got == size).then_some(text)
}

/// The root-relative path (when `keep`: it is searched again) and how it is shown.
fn shown(walker: &Walker, start: &Path, path: &Path, keep: bool) -> (PathBuf, String) {
    // Most queries start at the root, where the path is already relative to it.
    let rel = if start.as_os_str().is_empty() {
        path
    } else {
        path.strip_prefix(start).unwrap_or(path)
    };
    let kept = if keep {
        path.to_path_buf()
    } else {
        PathBuf::new()
    };
    (kept, walker.shown(rel))
}
