//! What the walk hands its visitors: each file found (`Found`), named relative to an open
//! directory or already open, with the ways to open and stat it that never follow a symlink
//! swapped in after the listing.

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::fs::{fstat, openat, statat, AtFlags, FileType, Mode, OFlags, Stat};
use toolroute_files::read_flags;

use super::Walker;

/// What a visitor does per file: almost nothing (glob), or enough to share the files out (grep).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerFile {
    /// Almost nothing (glob): one thread walks and visits.
    Cheap,
    /// Enough to share the files out among threads (grep).
    Costly,
}

/// A file the walk found, as the visitors see it: named relative to an open directory (or
/// already open, for the start file and followed links).
pub struct Found<'a> {
    pub(super) walker: &'a Walker,
    pub(super) rel: &'a Path,
    /// Where the file really is, relative to the root (no symlink on the way).
    pub(super) real: &'a Path,
    pub(super) at: At<'a>,
}

/// Where a found file is: a name in an open directory, or already open.
pub(super) enum At<'a> {
    Name(BorrowedFd<'a>, &'a CStr),
    Open(&'a OwnedFd),
}

impl Found<'_> {
    /// The path as shown to the caller.
    pub fn display(&self) -> String {
        self.walker.shown(self.rel)
    }

    /// Where the file really is relative to the root the walk is confined to, without any
    /// symlink on the way (for opening it again later with `Walker::reopen`, e.g. by an index).
    pub fn root_relative(&self) -> PathBuf {
        self.real.to_path_buf()
    }

    /// Open for reading: never following a symlink swapped in after the listing, never waiting
    /// on a FIFO or device swapped in the same way (`O_NONBLOCK`, then `fstat`).
    pub fn open(&self) -> io::Result<File> {
        let fd = match self.at {
            At::Name(dir, name) => {
                openat(dir, name, read_flags() | OFlags::NOFOLLOW, Mode::empty())?
            }
            At::Open(fd) => fd.try_clone()?,
        };
        regular_file(fd)
    }

    /// Inode, size and status-change time (ns), without following a symlink: what tells a file
    /// rewritten or replaced since (the change time cannot be set back by the user).
    pub fn identity(&self) -> Option<(u64, u64, i128)> {
        let st = match self.at {
            At::Name(dir, name) => statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?,
            At::Open(fd) => fstat(fd).ok()?,
        };
        let ctime = i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec);
        Some((st.st_ino, st.st_size as u64, ctime))
    }

    /// Modification time, without following a symlink.
    pub fn modified(&self) -> Option<SystemTime> {
        let st = match self.at {
            At::Name(dir, name) => statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?,
            At::Open(fd) => fstat(fd).ok()?,
        };
        mtime(&st)
    }
}

pub(super) fn mtime(st: &Stat) -> Option<SystemTime> {
    let secs = u64::try_from(st.st_mtime).ok()?;
    let nanos = u32::try_from(st.st_mtime_nsec).unwrap_or(0);
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

/// Keep `fd` only if it is a regular file.
pub(super) fn regular_file(fd: OwnedFd) -> io::Result<File> {
    let st = fstat(&fd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(File::from(fd))
}
