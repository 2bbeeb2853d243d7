//! Freshness without a watch (inotify unavailable, out of watches, events lost): before each
//! answer every listed folder, its rule files and every indexed file are looked at again, and
//! what changed is marked as the watcher would have marked it.

use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{fstat, statat, AtFlags, Stat};

use super::watch::Mark;

/// Inode and change time of something, or `None` when it is missing.
pub(crate) type Stamp = Option<(u64, i128)>;

/// What a folder was when it was listed: itself and each rule source in it.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DirStamp {
    pub(crate) dir: Stamp,
    pub(crate) rules: [Stamp; 4],
}

/// The rule sources `rules.rs` reads in a folder (a `.git` itself marks a repository boundary).
const RULES: [&CStr; 4] = [c".gitignore", c".ignore", c".git", c".git/info/exclude"];

fn stamp(st: &Stat) -> (u64, i128) {
    let ctime = i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec);
    (st.st_ino, ctime)
}

/// The stamp of a folder open as `fd`, taken before it is listed (a change after that shows
/// as a difference later, never the other way round).
pub(crate) fn dir_stamp(fd: BorrowedFd<'_>) -> DirStamp {
    let mut out = DirStamp {
        dir: fstat(fd).ok().map(|st| stamp(&st)),
        rules: [None; 4],
    };
    for (slot, name) in out.rules.iter_mut().zip(RULES) {
        *slot = statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| stamp(&st));
    }
    out
}

/// Marks for what changed since the stamps were taken: `dirs` are listed folders
/// (root-relative) with their stamps, `files` indexed files with their identity (inode, size,
/// change time) when known.
pub(crate) fn check<'a>(
    root: &OwnedFd,
    dirs: impl Iterator<Item = (&'a PathBuf, DirStamp)>,
    files: impl Iterator<Item = (PathBuf, (u64, u64, i128))>,
) -> Vec<Mark> {
    let mut marks = Vec::new();
    for (dir, was) in dirs {
        let now = stamp_at(root, dir);
        if now.rules != was.rules {
            marks.push(Mark::Broken(format!("rules changed in {dir:?}")));
            return marks;
        }
        if now.dir != was.dir {
            marks.push(Mark::Relist(dir.clone()));
        }
    }
    for (path, ident) in files {
        let now = statat(root.as_fd(), &path, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| (st.st_ino, st.st_size as u64, stamp(&st).1));
        if now != Some(ident) {
            marks.push(Mark::Dirty(path));
        }
    }
    marks
}

/// The stamp of the folder `dir` (root-relative), looked up by path from the root.
fn stamp_at(root: &OwnedFd, dir: &Path) -> DirStamp {
    let at = |rel: &Path| {
        let st = if rel.as_os_str().is_empty() {
            fstat(root)
        } else {
            statat(root.as_fd(), rel, AtFlags::SYMLINK_NOFOLLOW)
        };
        st.ok().map(|st| stamp(&st))
    };
    let mut out = DirStamp {
        dir: at(dir),
        rules: [None; 4],
    };
    for (slot, name) in out.rules.iter_mut().zip(RULES) {
        let name = std::ffi::OsStr::from_bytes(name.to_bytes());
        *slot = at(&dir.join(name));
    }
    out
}
