//! The indexed file list: per listed directory, the files and subdirectories the default walk
//! admitted and the entries it counted as hidden or ignored. Replaying it with a query's start
//! and filters reproduces that query's walk, skip counts included (see `Walker::admit`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use crate::walker::Walker;
use crate::SkipStats;

/// Inode and change time of something, or `None` when it is missing.
pub(crate) type Stamp = Option<(u64, i128)>;

/// What a folder was when it was listed: itself and each rule source in it.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DirStamp {
    pub(crate) dir: Stamp,
    pub(crate) rules: [Stamp; 4],
}

#[derive(Default, Clone)]
pub(crate) struct DirNode {
    pub(crate) files: Vec<(Box<[u8]>, u32)>,
    pub(crate) dirs: Vec<Box<[u8]>>,
    /// Name, is a directory, hidden (else ignored).
    pub(crate) skipped: Vec<(Box<[u8]>, bool, bool)>,
    /// The folder and its rule files as they were when it was listed.
    pub(crate) stamp: DirStamp,
}

impl DirNode {
    /// Names in byte order, so that a replay yields paths in the order results are shown.
    pub(crate) fn sort(&mut self) {
        self.files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        self.dirs.sort_unstable();
    }
}

/// Whether file `f` comes before everything in folder `d` in path order
/// (`search::bytes_order`, where the separator sorts lowest): `d`'s paths are `d/...`.
fn file_first(f: &[u8], d: &[u8]) -> bool {
    let n = f.len().min(d.len());
    match f[..n].cmp(&d[..n]) {
        std::cmp::Ordering::Equal => f.len() <= d.len(), // `ab` < `ab/..`; `ab/..` < `abc`
        order => order.is_lt(),
    }
}

/// Listed directories by root-relative path (the root is `""`).
#[derive(Default)]
pub(crate) struct Tree {
    pub(crate) dirs: FxHashMap<PathBuf, DirNode>,
}

fn name_of(path: &Path) -> Box<[u8]> {
    path.file_name()
        .map_or_else(Vec::new, |n| n.as_bytes().to_vec())
        .into_boxed_slice()
}

fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// What one walk (from `start`) saw, root-relative.
#[derive(Default)]
pub(crate) struct Listing {
    pub(crate) listed: Vec<PathBuf>,
    pub(crate) files: Vec<(PathBuf, u32)>,
    pub(crate) skipped: Vec<(PathBuf, bool, bool)>,
    pub(crate) stamps: Vec<(PathBuf, DirStamp)>,
    /// Folders admitted but not entered (a shallow walk).
    pub(crate) subdirs: Vec<PathBuf>,
}

impl Tree {
    /// Put a walk's listing in, replacing whatever was below its start.
    pub(crate) fn insert(&mut self, start: &Path, listing: Listing) {
        for dir in &listing.listed {
            self.dirs.entry(dir.clone()).or_default();
        }
        for (dir, stamp) in listing.stamps {
            if let Some(node) = self.dirs.get_mut(&dir) {
                node.stamp = stamp;
            }
        }
        for dir in &listing.listed {
            if dir.as_path() != start {
                if let Some(node) = self.dirs.get_mut(&parent_of(dir)) {
                    node.dirs.push(name_of(dir));
                }
            }
        }
        for (path, id) in listing.files {
            if let Some(node) = self.dirs.get_mut(&parent_of(&path)) {
                node.files.push((name_of(&path), id));
            }
        }
        for (path, is_dir, hidden) in listing.skipped {
            if let Some(node) = self.dirs.get_mut(&parent_of(&path)) {
                node.skipped.push((name_of(&path), is_dir, hidden));
            }
        }
        for dir in &listing.listed {
            if let Some(node) = self.dirs.get_mut(dir) {
                node.sort();
            }
        }
    }

    /// Take out `dir` and everything below it; returns the files it held, by path.
    pub(crate) fn remove(&mut self, dir: &Path) -> FxHashMap<PathBuf, u32> {
        let below: Vec<PathBuf> = self
            .dirs
            .keys()
            .filter(|d| d.starts_with(dir))
            .cloned()
            .collect();
        let mut files = FxHashMap::default();
        for d in below {
            if let Some(node) = self.dirs.remove(&d) {
                for (name, id) in node.files {
                    files.insert(d.join(OsStr::from_bytes(&name)), id);
                }
            }
        }
        files
    }

    /// Put a shallow listing of `dir` in place of its own entries; its subfolders' listings stay.
    pub(crate) fn replace_entries(&mut self, dir: &Path, listing: Listing) {
        let dirs = listing.subdirs.iter().map(|d| name_of(d)).collect();
        self.dirs.insert(dir.to_path_buf(), DirNode::default());
        self.insert(dir, listing);
        if let Some(node) = self.dirs.get_mut(dir) {
            node.dirs = dirs;
            node.sort();
        }
    }

    /// The subfolders a folder's listing admitted, root-relative.
    pub(crate) fn subdirs(&self, dir: &Path) -> Vec<PathBuf> {
        self.dirs.get(dir).map_or_else(Vec::new, |n| {
            n.dirs
                .iter()
                .map(|d| dir.join(OsStr::from_bytes(d)))
                .collect()
        })
    }

    /// The files a folder itself holds, by root-relative path.
    pub(crate) fn own_files(&self, dir: &Path) -> FxHashMap<PathBuf, u32> {
        self.dirs.get(dir).map_or_else(FxHashMap::default, |n| {
            n.files
                .iter()
                .map(|(name, id)| (dir.join(OsStr::from_bytes(name)), *id))
                .collect()
        })
    }

    /// The id of an indexed file.
    pub(crate) fn id(&self, path: &Path) -> Option<u32> {
        let name = path.file_name()?.as_bytes();
        let node = self.dirs.get(&parent_of(path))?;
        node.files
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|&(_, id)| id)
    }

    pub(crate) fn file_count(&self) -> usize {
        self.dirs.values().map(|n| n.files.len()).sum()
    }

    /// Replay the walk `w` would do (its start must be a listed directory): call `visit` with
    /// the folder (root-relative) and name of each file it would search, and return the
    /// hidden/ignored counts.
    pub(crate) fn replay(
        &self,
        w: &Walker,
        mut visit: impl FnMut(&Path, &[u8], u32),
    ) -> Option<SkipStats> {
        let (start, is_dir) = w.start();
        if !is_dir || !self.dirs.contains_key(start) {
            return None;
        }
        let filtered = w.filtered();
        let mut stats = SkipStats::default();
        // Depth first, each folder's files and subfolders merged in path order (nodes keep their
        // names sorted), so files come out in the order results are shown. A frame: the folder
        // (its path, path below the start, node) and how far its files and subfolders are done.
        struct Frame<'t> {
            real: PathBuf,
            rel: PathBuf,
            node: &'t DirNode,
            file: usize,
            dir: usize,
        }
        let mut stack: Vec<Frame<'_>> = Vec::new();
        let enter = |real: PathBuf, rel: PathBuf, stats: &mut SkipStats| {
            let node = self.dirs.get(&real)?;
            let mut rel = rel;
            for (name, is_dir, hidden) in &node.skipped {
                if !*hidden {
                    stats.ignored += 1;
                } else if !(filtered && rejected_child(w, &mut rel, name, *is_dir)) {
                    stats.hidden += 1;
                }
            }
            Some(Frame {
                real,
                rel,
                node,
                file: 0,
                dir: 0,
            })
        };
        stack.extend(enter(start.to_path_buf(), PathBuf::new(), &mut stats));
        while let Some(top) = stack.last_mut() {
            let node = top.node;
            let file = node.files.get(top.file);
            let dir = node.dirs.get(top.dir);
            match (file, dir) {
                (Some((name, id)), d) if d.is_none_or(|d| file_first(name, d)) => {
                    top.file += 1;
                    if !(filtered && rejected_child(w, &mut top.rel, name, false)) {
                        visit(&top.real, name, *id);
                    }
                }
                (_, Some(name)) => {
                    top.dir += 1;
                    if w.rejects_dirs() && filtered && rejected_child(w, &mut top.rel, name, true) {
                        continue;
                    }
                    let name = OsStr::from_bytes(name);
                    let (real, rel) = (top.real.join(name), top.rel.join(name));
                    if let Some(frame) = enter(real, rel, &mut stats) {
                        stack.push(frame);
                    }
                }
                _ => {
                    stack.pop();
                }
            }
        }
        Some(stats)
    }
}

/// The filters' verdict on `rel/name`: `rel` grows by the name and shrinks back, so checking an
/// entry allocates nothing.
fn rejected_child(w: &Walker, rel: &mut PathBuf, name: &[u8], is_dir: bool) -> bool {
    rel.push(OsStr::from_bytes(name));
    let out = w.rejected(rel, is_dir);
    rel.pop();
    out
}
