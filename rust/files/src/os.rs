//! What differs between the systems toolroute runs on, in one place. `cfg(native_linux)` (set by
//! `build.rs`) is Linux without the `portable` feature: `O_PATH`, `openat2`, `O_TMPFILE` and
//! inotify are used there. Everywhere else, and on Linux built `portable` (as CI runs the whole
//! suite once), the same work is done with POSIX calls macOS has too.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{OFlags, Stat};
use rustix::io::Errno;

/// Flags for a handle that is only looked through (fstat, and opens or readlinkat beneath it),
/// never read from: `O_PATH` on Linux (no read permission needed, a FIFO or device never
/// opened); elsewhere, and in the `portable` build, a read-only open that does not wait.
pub fn handle_flags() -> OFlags {
    #[cfg(native_linux)]
    let flags = OFlags::PATH;
    #[cfg(not(native_linux))]
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    flags
}

/// The permission bits and type of a `stat`, as `u32` on every OS (macOS's `mode_t` is 16 bits).
#[allow(clippy::useless_conversion)]
pub fn stat_mode(st: &Stat) -> u32 {
    u32::from(st.st_mode)
}

/// How many names a `stat`'s file has (macOS's `nlink_t` is 16 bits).
#[allow(clippy::useless_conversion)]
pub fn link_count(st: &Stat) -> u64 {
    u64::from(st.st_nlink)
}

/// What a `stat` names: device and inode (macOS's `dev_t` is a signed 32 bits).
#[allow(clippy::unnecessary_cast)]
pub fn file_id(st: &Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino)
}

/// Set once `openat2` is known missing (old kernel) or forbidden (seccomp) in this process.
#[cfg(native_linux)]
static NO_OPENAT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, with `RESOLVE_NO_SYMLINKS` when asked;
/// `ENOSYS` where there is none (the caller then walks the components itself).
#[cfg(native_linux)]
pub fn openat2_beneath(
    base: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    no_symlinks: bool,
) -> Result<OwnedFd, Errno> {
    use rustix::fs::{openat2, Mode, ResolveFlags};
    use std::sync::atomic::Ordering;
    if NO_OPENAT2.load(Ordering::Relaxed) {
        return Err(Errno::NOSYS);
    }
    let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    if no_symlinks {
        resolve |= ResolveFlags::NO_SYMLINKS;
    }
    let got = openat2(base, rel, flags, Mode::empty(), resolve);
    if let Err(Errno::NOSYS | Errno::PERM) = got {
        NO_OPENAT2.store(true, Ordering::Relaxed);
    }
    got
}

/// No `openat2` in this build: always `ENOSYS`, so the caller walks the components itself.
#[cfg(not(native_linux))]
pub fn openat2_beneath(
    _base: BorrowedFd<'_>,
    _rel: &Path,
    _flags: OFlags,
    _no_symlinks: bool,
) -> Result<OwnedFd, Errno> {
    Err(Errno::NOSYS)
}

/// A file with no name yet in the folder `dir` (`O_TMPFILE`), or `None` where there is none:
/// the caller then creates a named temporary with `O_EXCL`.
pub fn anonymous_file(dir: BorrowedFd<'_>, mode: rustix::fs::Mode) -> Option<OwnedFd> {
    #[cfg(native_linux)]
    let made = rustix::fs::openat(
        dir,
        ".",
        OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
        mode,
    )
    .ok();
    #[cfg(not(native_linux))]
    let made = {
        let _ = (dir, mode);
        None
    };
    made
}

/// Sync a file's data and what is needed to read it back (`fdatasync`); macOS has none, and
/// gets a whole `fsync`.
pub fn sync_data(fd: BorrowedFd<'_>) -> rustix::io::Result<()> {
    #[cfg(not(target_vendor = "apple"))]
    let synced = rustix::fs::fdatasync(fd);
    #[cfg(target_vendor = "apple")]
    let synced = rustix::fs::fsync(fd);
    synced
}
