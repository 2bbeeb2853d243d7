//! Freshness without a watch (inotify unavailable, out of watches, events lost): before each
//! answer every listed folder, its rule files and every indexed file are looked at again, and
//! what changed is marked as the watcher would have marked it.

use std::ffi::{CStr, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rustix::fs::{fstat, statat, AtFlags, FileType, OFlags, Stat};

use super::tree::{DirNode, DirStamp, Tree};
use super::watch::Mark;
use crate::rules::{GIT_EXCLUDE, RULE_NAMES};
use toolroute_files::open_beneath;

/// The rule sources `rules.rs` reads in a folder (a `.git` itself marks a repository boundary).
const RULES: [&CStr; 4] = [RULE_NAMES[0], RULE_NAMES[1], RULE_NAMES[2], GIT_EXCLUDE];

fn stamp(st: &Stat) -> (u64, i128) {
    let ctime = i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec);
    (st.st_ino, ctime)
}

/// A rule source's stamp. A `.git` folder only marks where a repository starts (its rules are
/// `.git/info/exclude`, stamped apart), so only which folder it is counts: every commit changes
/// its ctime, and that must not make a checked index rebuild.
fn rule_stamp(st: &Stat) -> (u64, i128) {
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        (st.st_ino, 0)
    } else {
        stamp(st)
    }
}

/// The stamp of a folder open as `fd`, taken before it is listed (a change after that shows
/// as a difference later, never the other way round).
pub(crate) fn dir_stamp(fd: BorrowedFd<'_>) -> DirStamp {
    stamp_against(fd, None)
}

/// The folder's stamp now, looking up only the rule files that can differ from `was`: while the
/// folder's own change time is the same, no entry was made, removed or renamed in it, so a rule
/// file that was missing still is (and `.git/info/exclude` too while `.git` is missing). Most
/// folders have no rule files: this saves four lookups each on every check.
fn stamp_against(fd: BorrowedFd<'_>, was: Option<&DirStamp>) -> DirStamp {
    let mut out = DirStamp {
        dir: fstat(fd).ok().map(|st| stamp(&st)),
        rules: [None; 4],
    };
    let same_dir = was.filter(|w| w.dir.is_some() && w.dir == out.dir);
    for (i, name) in RULES.iter().enumerate() {
        // `RULES[3]`, `.git/info/exclude`, lies in `.git/info`, not in this folder.
        let still_missing =
            same_dir.is_some_and(|w| w.rules[i].is_none() && (i != 3 || w.rules[2].is_none()));
        if !still_missing {
            out.rules[i] = statat(fd, *name, AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|st| rule_stamp(&st));
        }
    }
    out
}

/// Marks for what changed since the stamps were taken, folder by folder: each listed folder is
/// opened once (beneath the root) and its stamp, rule files and indexed files (with their
/// identity when known: a dirty file is searched anyway) looked at relative to it.
pub(crate) fn check(
    root: &OwnedFd,
    tree: &Tree,
    ident: impl Fn(u32) -> Option<(u64, u64, i128)> + Sync,
) -> Vec<Mark> {
    let dirs: Vec<(&PathBuf, &DirNode)> = tree.dirs.iter().collect();
    let next = AtomicUsize::new(0);
    let found = Mutex::new(Vec::new());
    let work = || {
        let mut marks = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some((dir, node)) = dirs.get(i) else {
                break;
            };
            check_dir(root, dir, node, &ident, &mut marks);
        }
        found
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(marks);
    };
    // As many threads as a walk would use (this is a walk's worth of system calls), but none
    // for a small tree, where starting one costs more.
    let threads = if dirs.len() < 64 {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(12))
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });
    let marks = found.into_inner().unwrap_or_else(|e| e.into_inner());
    match marks.iter().position(|m| matches!(m, Mark::Broken(_))) {
        Some(i) => vec![marks.into_iter().nth(i).unwrap_or(Mark::Lost)],
        None => marks,
    }
}

fn check_dir(
    root: &OwnedFd,
    dir: &Path,
    node: &DirNode,
    ident: &impl Fn(u32) -> Option<(u64, u64, i128)>,
    marks: &mut Vec<Mark>,
) {
    let opened;
    let fd = if dir.as_os_str().is_empty() {
        root.as_fd()
    } else {
        let flags = toolroute_files::handle_flags() | OFlags::DIRECTORY | OFlags::NOFOLLOW;
        match open_beneath(root.as_fd(), dir, flags) {
            Ok(fd) => {
                opened = fd;
                opened.as_fd()
            }
            Err(_) => {
                // Gone or replaced: its parent's stamp has changed too.
                return marks.push(Mark::Entries(dir.to_path_buf()));
            }
        }
    };
    let now = stamp_against(fd, Some(&node.stamp));
    if now.rules != node.stamp.rules {
        return marks.push(Mark::Broken(format!("rules changed in {dir:?}")));
    }
    if now.dir != node.stamp.dir {
        marks.push(Mark::Entries(dir.to_path_buf()));
    }
    for (name, id) in &node.files {
        let Some(was) = ident(*id) else { continue };
        let name = OsStr::from_bytes(name);
        let now = statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| (st.st_ino, st.st_size as u64, stamp(&st).1));
        if now != Some(was) {
            marks.push(Mark::Dirty(dir.join(name)));
        }
    }
}
