//! The indexed file list: per listed directory, the files and subdirectories the default walk
//! admitted and the entries it counted as hidden or ignored. Replaying it with a query's start
//! and filters reproduces that query's walk, skip counts included (see `Walker::admit`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use crate::search::walker::Walker;
use crate::search::SkipStats;

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
        let mut stack = vec![(start.to_path_buf(), PathBuf::new())];
        while let Some((real, mut rel)) = stack.pop() {
            let Some(node) = self.dirs.get(&real) else {
                continue;
            };
            let rejected = |rel: &mut PathBuf, name: &[u8], is_dir: bool| {
                filtered && rejected_child(w, rel, name, is_dir)
            };
            for (name, is_dir, hidden) in &node.skipped {
                if !*hidden {
                    stats.ignored += 1;
                } else if !rejected(&mut rel, name, *is_dir) {
                    stats.hidden += 1;
                }
            }
            for (name, id) in &node.files {
                if !rejected(&mut rel, name, false) {
                    visit(&real, name, *id);
                }
            }
            for name in &node.dirs {
                if !(w.rejects_dirs() && rejected(&mut rel, name, true)) {
                    let name = OsStr::from_bytes(name);
                    stack.push((real.join(name), rel.join(name)));
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
