//! The quick walk, for a tree no ignore rule can reach (no ignore file or repository in it or
//! above it, no global excludes, or `no_ignore`): plain `read_dir` listings over a few threads,
//! with the same hidden, VCS, glob and type decisions as the `ignore` crate's walk, and hidden
//! entries counted from the one listing. The crate's walk costs about twice a plain listing, and
//! its idle workers sleep in 1 ms steps, which dominates on small trees.
//!
//! Directories are the unit of work; the files of one are visited while it is listed when that
//! is cheap (glob), and otherwise queued one by one so the threads share them (grep). Either way
//! a directory is open only while it is listed.
//!
//! It gives up (returns `None`) as soon as a listing shows a rule source, or on any error; the
//! classic walk then starts over and reports exactly what it always did.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crossbeam_channel::{Receiver, Sender};

use super::walker::{is_hidden, is_vcs_dir, Found, PerFile, Walker, RULE_SOURCES};
use super::SkipStats;

enum Item {
    Dir(PathBuf),
    File(PathBuf),
    Stop,
}

struct Shared<'a> {
    walker: &'a Walker,
    threads: usize,
    per_file: PerFile,
    tx: Sender<Item>,
    rx: Receiver<Item>,
    /// Items sent and not finished yet; the worker that takes it to zero stops everyone.
    pending: AtomicUsize,
    gave_up: AtomicBool,
    total: Mutex<SkipStats>,
}

/// Walk `walker`'s start path; `None` when the classic walk must do it instead.
pub(super) fn walk<F, V>(
    walker: &Walker,
    threads: usize,
    per_file: PerFile,
    make: &F,
) -> Option<SkipStats>
where
    F: Fn() -> V + Sync,
    V: FnMut(&Found<'_>, &mut SkipStats) + Send,
{
    let start = walker.start();
    let meta = fs::metadata(start).ok()?;
    if !meta.is_dir() {
        // A file named as the path is searched whatever the rules say (as in the crate).
        let mut stats = SkipStats::default();
        if meta.is_file() {
            (make())(&Found::listed(start, None), &mut stats);
        }
        return Some(stats);
    }
    let (tx, rx) = crossbeam_channel::unbounded();
    let shared = Shared {
        walker,
        threads,
        per_file,
        tx,
        rx,
        pending: AtomicUsize::new(1),
        gave_up: AtomicBool::new(false),
        total: Mutex::new(SkipStats::default()),
    };
    shared.tx.send(Item::Dir(start.to_path_buf())).ok()?;
    if threads <= 1 {
        shared.work(make());
    } else {
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(|| shared.work(make()));
            }
            shared.work(make());
        });
    }
    if shared.gave_up.load(Ordering::Relaxed) {
        return None;
    }
    Some(shared.total.into_inner().unwrap_or_else(|e| e.into_inner()))
}

impl Shared<'_> {
    fn work<V>(&self, mut visit: V)
    where
        V: FnMut(&Found<'_>, &mut SkipStats),
    {
        let mut stats = SkipStats::default();
        while let Ok(item) = self.rx.recv() {
            if !self.gave_up.load(Ordering::Relaxed) {
                match &item {
                    Item::Dir(dir) => {
                        if self.list(dir, &mut visit, &mut stats).is_none() {
                            self.gave_up.store(true, Ordering::Relaxed);
                        }
                    }
                    Item::File(path) => visit(&Found::listed(path, None), &mut stats),
                    Item::Stop => break,
                }
            } else if matches!(item, Item::Stop) {
                break;
            }
            if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                for _ in 0..self.threads {
                    let _ = self.tx.send(Item::Stop);
                }
            }
        }
        // Drop the visitor (it flushes its results) before the walk returns.
        drop(visit);
        self.total
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .merge(&stats);
    }

    /// Queue a directory's children the way the crate's walk would yield them; `None` to give up.
    fn list<V>(&self, dir: &Path, visit: &mut V, stats: &mut SkipStats) -> Option<()>
    where
        V: FnMut(&Found<'_>, &mut SkipStats),
    {
        let opts = self.walker.options();
        let filters = self.walker.filters();
        for entry in fs::read_dir(dir).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name();
            if !opts.no_ignore && RULE_SOURCES.iter().any(|s| name == *s) {
                return None;
            }
            let file_type = entry.file_type().ok()?;
            let is_dir = file_type.is_dir();
            let vcs = is_dir && is_vcs_dir(&name);
            if !opts.hidden && is_hidden(&name) {
                // Counted as the classic walk counts them: not VCS dirs, not what the glob or
                // type would drop anyway.
                if !(vcs || filters.rejects(&entry.path(), is_dir)) {
                    stats.hidden += 1;
                }
                continue;
            }
            if vcs {
                continue;
            }
            let path = entry.path();
            if filters.rejects(&path, is_dir) {
                continue;
            }
            // Symlinks (not followed here) and special files are not listed, as in the crate's walk.
            let item = if is_dir {
                Item::Dir(path)
            } else if !file_type.is_file() {
                continue;
            } else if self.per_file == PerFile::Cheap {
                // Here, while the directory is open: its metadata is one relative lookup.
                visit(&Found::listed(&path, Some(&entry)), stats);
                continue;
            } else {
                Item::File(path)
            };
            self.pending.fetch_add(1, Ordering::AcqRel);
            self.tx.send(item).ok()?;
        }
        Some(())
    }
}
