//! Walking a tree (or one folder again) for the index, with the tools' own walker: what it
//! lists, admits and skips is recorded, and (for a full build) each file's trigrams.

use std::io::Read;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::postings::{Shard, ShardBuilder};
use super::tree::Listing;
use super::trigram::Extractor;
use super::validate::dir_stamp;
use super::watch::Watch;
use crate::walker::{Found, Observer, PerFile, WalkOptions, Walker};
use crate::SkipStats;
use toolroute_files::Roots;

/// Files at least this big are searched on every query rather than indexed: the searcher
/// could fail on them (its heap limit) and the index must not hide such an error.
pub(crate) const MAX_INDEXED: u64 = 32 * 1024 * 1024;

/// Inode, size and change time: a re-listed file whose identity differs was rewritten.
pub(crate) type Ident = (u64, u64, i128);

/// Per-file facts the queries need besides trigrams.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    pub(crate) has_nul: bool,
    /// Always searched (a byte order mark, a huge file, a file with several links: a change
    /// through a link in another folder reaches no watch of ours).
    pub(crate) unsure: bool,
    /// The file as it was when read (taken before reading).
    pub(crate) ident: Ident,
}

/// Whether a file has more than one name: then it is never trusted to the watch.
pub(crate) fn linked(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.nlink() > 1
}

/// The identity of an open file.
pub(crate) fn ident_of(meta: &std::fs::Metadata) -> Ident {
    use std::os::unix::fs::MetadataExt;
    let ctime = i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec());
    (meta.ino(), meta.size(), ctime)
}

pub(crate) struct Built {
    pub(crate) listing: Listing,
    /// Some folder is not watched: changes must be found by checking (`validate.rs`).
    pub(crate) unwatched: bool,
    pub(crate) shards: Vec<Shard>,
    pub(crate) facts: Vec<(u32, Facts)>,
    pub(crate) bytes: u64,
}

/// What the walk saw besides files, and whether it can be trusted.
struct Recorder {
    start: PathBuf,
    watch: Option<Arc<Watch>>,
    seen: Mutex<Listing>,
    failed: AtomicBool,
    /// A folder could not be watched (out of watches, or it vanished).
    unwatched: AtomicBool,
}

impl Observer for Recorder {
    fn listing(&self, real: &Path, fd: BorrowedFd<'_>) {
        if let Some(watch) = &self.watch {
            if watch.add(real).is_err() {
                self.unwatched.store(true, Ordering::Relaxed);
            }
        }
        let stamp = dir_stamp(fd);
        let mut seen = lock(&self.seen);
        seen.listed.push(real.to_path_buf());
        seen.stamps.push((real.to_path_buf(), stamp));
    }

    fn subdir(&self, real: &Path) {
        lock(&self.seen).subdirs.push(real.to_path_buf());
    }

    fn skipped(&self, rel: &Path, is_dir: bool, hidden: bool) {
        let path = self.start.join(rel);
        lock(&self.seen).skipped.push((path, is_dir, hidden));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the walk threads hand in: shards, facts, files and bytes read.
type Gathered = (Vec<Shard>, Vec<(u32, Facts)>, Vec<(PathBuf, u32)>, u64);

/// One walk thread's share.
struct Visitor<'a> {
    out: &'a Mutex<Gathered>,
    ids: &'a AtomicU32,
    failed: &'a AtomicBool,
    extractor: Option<Extractor>,
    shard: ShardBuilder,
    facts: Vec<(u32, Facts)>,
    files: Vec<(PathBuf, u32)>,
    bytes: u64,
}

impl Visitor<'_> {
    fn visit(&mut self, found: &Found<'_>) {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        self.files.push((found.root_relative(), id));
        let Some(extractor) = self.extractor.as_mut() else {
            // A re-listing: only who the file is, to tell a rewritten one from a known one.
            match found.identity() {
                Some(ident) => self.facts.push((
                    id,
                    Facts {
                        ident,
                        ..Facts::default()
                    },
                )),
                None => self.failed.store(true, Ordering::Relaxed),
            }
            return;
        };
        let read = found.open().and_then(|file| {
            let meta = file.metadata()?;
            let (ident, linked) = (ident_of(&meta), linked(&meta));
            if ident.1 >= MAX_INDEXED {
                return Ok((None, ident, linked));
            }
            Ok((
                Some(extractor.read(&mut file.take(MAX_INDEXED))?),
                ident,
                linked,
            ))
        });
        match read {
            Ok((Some(grams), ident, linked)) => {
                self.shard.add(id, &grams.grams);
                self.bytes += grams.bytes;
                let facts = Facts {
                    has_nul: grams.has_nul,
                    unsure: grams.unsure || linked,
                    ident,
                };
                self.facts.push((id, facts));
            }
            Ok((None, ident, _)) => self.facts.push((
                id,
                Facts {
                    has_nul: false,
                    unsure: true,
                    ident,
                },
            )),
            // The searcher would report it: this tree is scanned as today instead.
            Err(_) => self.failed.store(true, Ordering::Relaxed),
        }
    }
}

impl Drop for Visitor<'_> {
    fn drop(&mut self) {
        let mut out = lock(self.out);
        out.0.push(std::mem::take(&mut self.shard).finish());
        out.1.append(&mut self.facts);
        out.2.append(&mut self.files);
        out.3 += self.bytes;
    }
}

/// The walk settings an index is keyed by (no globs or types: those are replayed per query).
pub(crate) fn walk_options(hidden: bool, no_ignore: bool, require_git: bool) -> WalkOptions {
    WalkOptions {
        hidden,
        no_ignore,
        require_git,
        globs_from_workspace: true,
        ..WalkOptions::default()
    }
}

/// How much of a folder a walk covers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    /// Everything below, each file read for its trigrams (a build).
    Build,
    /// Everything below, files only listed (new or moved-in folders).
    Tree,
    /// The folder's own entries (a file created, removed or renamed in it).
    Entries,
}

/// Walk `dir` (absolute, beneath a root of `roots`), watching each folder before it is listed.
/// Ids are taken from `ids`. `None` when the walk met anything an index cannot reproduce
/// (errors, links leading outside).
pub(crate) fn walk(
    roots: &Roots,
    dir: &Path,
    opts: WalkOptions,
    watch: Option<&Arc<Watch>>,
    ids: &AtomicU32,
    depth: Depth,
) -> Option<Built> {
    let grams = depth == Depth::Build;
    let mut walker = Walker::new(roots, Some(dir.to_str()?), opts).ok()?;
    if depth == Depth::Entries {
        walker.shallow();
    }
    let (start, is_dir) = walker.start();
    if !is_dir {
        return None;
    }
    let recorder = Arc::new(Recorder {
        start: start.to_path_buf(),
        watch: watch.cloned(),
        seen: Mutex::new(Listing::default()),
        failed: AtomicBool::new(false),
        unwatched: AtomicBool::new(false),
    });
    walker.observe(recorder.clone());
    let out: Mutex<Gathered> = Mutex::new((Vec::new(), Vec::new(), Vec::new(), 0));
    let stats: SkipStats = walker.walk(PerFile::Costly, || {
        let mut v = Visitor {
            out: &out,
            ids,
            failed: &recorder.failed,
            extractor: grams.then(Extractor::new),
            shard: ShardBuilder::default(),
            facts: Vec::new(),
            files: Vec::new(),
            bytes: 0,
        };
        move |found: &Found<'_>, _: &mut SkipStats| v.visit(found)
    });
    drop(walker);
    if stats.errors > 0 || stats.outside_roots > 0 || recorder.failed.load(Ordering::Relaxed) {
        return None;
    }
    let (shards, facts, files, bytes) = out.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut listing = std::mem::take(&mut *lock(&recorder.seen));
    listing.files = files;
    Some(Built {
        listing,
        unwatched: recorder.unwatched.load(Ordering::Relaxed),
        shards,
        facts,
        bytes,
    })
}
