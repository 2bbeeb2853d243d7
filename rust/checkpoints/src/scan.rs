//! The workspace as it is now: every file, link and folder with the stamps that tell a change,
//! found by descriptor from the workspace root (never following a link). `.git` folders and the
//! file layer's own temps and journals are not part of it.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{openat, statat, AtFlags, Dir, FileType, Mode, OFlags, Stat};

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A symbolic link.
    Link,
    /// A folder.
    Dir,
    /// Anything else (a FIFO, a socket, a device): never stored, never restored.
    Other,
}

/// The stamps of one path: a change to its content or mode changes at least one of them
/// (`ctime` cannot be set back by a process, unlike `mtime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// What it is.
    pub kind: Kind,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Change time, in nanoseconds since the epoch.
    pub ctime_ns: i128,
    /// Inode.
    pub ino: u64,
}

impl Stamp {
    // The casts are needed where `stat`'s fields are narrower (macOS: a 16-bit mode).
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &Stat) -> Self {
        let kind = match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => Kind::File,
            FileType::Symlink => Kind::Link,
            FileType::Directory => Kind::Dir,
            _ => Kind::Other,
        };
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stamp {
            kind,
            mode: (st.st_mode as u32) & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size as u64,
            mtime_ns: ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime_ns: ns(st.st_ctime as i64, st.st_ctime_nsec as i64),
            ino: st.st_ino as u64,
        }
    }
}

/// Every path beneath the workspace, relative to it.
pub type Tree = rustc_hash::FxHashMap<PathBuf, Stamp>;

/// Names never part of a checkpoint: version control's own folder (rewinding it would undo
/// commits) and the file layer's temps and journals.
pub fn excluded(name: &OsStr) -> bool {
    name == ".git"
        || name
            .as_bytes()
            .starts_with(toolroute_files::TEMP_PREFIX.as_bytes())
}

/// Why a scan stopped.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// The file system failed.
    #[error("cannot scan {path}: {source}")]
    Io {
        /// The folder, relative to the workspace.
        path: String,
        /// The system's error.
        source: io::Error,
    },
    /// More paths than a checkpoint may hold.
    #[error("the workspace holds more than {limit} paths, over the checkpoint limit")]
    TooMany {
        /// The limit.
        limit: usize,
    },
}

fn open_dir(at: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(openat(at, name, flags, Mode::empty())?)
}

/// Scan the tree beneath `root` (a folder's descriptor), at most `max_paths` paths.
pub fn scan(root: BorrowedFd<'_>, max_paths: usize) -> Result<Tree, ScanError> {
    let mut tree = Tree::default();
    let top = open_dir(root, OsStr::new(".")).map_err(|source| ScanError::Io {
        path: ".".into(),
        source,
    })?;
    let mut stack: Vec<(PathBuf, OwnedFd)> = vec![(PathBuf::new(), top)];
    while let Some((rel, fd)) = stack.pop() {
        let io_err = |source: io::Error| ScanError::Io {
            path: if rel.as_os_str().is_empty() {
                ".".into()
            } else {
                rel.display().to_string()
            },
            source,
        };
        let dir = Dir::read_from(fd.as_fd()).map_err(|e| io_err(e.into()))?;
        for entry in dir {
            let entry = entry.map_err(|e| io_err(e.into()))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." || excluded(name) {
                continue;
            }
            let st = match statat(fd.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(rustix::io::Errno::NOENT) => continue, // removed meanwhile
                Err(e) => return Err(io_err(e.into())),
            };
            let stamp = Stamp::of(&st);
            let path = rel.join(name);
            if stamp.kind == Kind::Dir {
                match open_dir(fd.as_fd(), name) {
                    Ok(sub) => stack.push((path.clone(), sub)),
                    Err(e) if e.raw_os_error() == Some(libc_enoent()) => continue,
                    Err(e) => return Err(io_err(e)),
                }
            }
            tree.insert(path, stamp);
            if tree.len() > max_paths {
                return Err(ScanError::TooMany { limit: max_paths });
            }
        }
    }
    Ok(tree)
}

fn libc_enoent() -> i32 {
    rustix::io::Errno::NOENT.raw_os_error()
}

/// Whether `path` lies beneath a folder of `tree` that is now something else (a link, a file):
/// the first such ancestor.
pub fn displaced_ancestor<'t>(tree: &'t Tree, path: &Path) -> Option<&'t Path> {
    let mut ancestor = path.parent()?;
    let mut found = None;
    while !ancestor.as_os_str().is_empty() {
        if let Some((p, s)) = tree.get_key_value(ancestor) {
            if s.kind != Kind::Dir {
                found = Some(p.as_path());
            }
        }
        ancestor = ancestor.parent()?;
    }
    found
}
