//! Open a path beneath a directory descriptor without ever resolving outside it.
//!
//! This is the search tools' copy of the "open beneath root" primitive; the file tools get their
//! own (`rust/src/beneath.rs`), and the two are meant to become one. Semantics:
//! - `..` past the base, absolute paths and symlinks whose target leaves the base are refused
//!   (`EXDEV`), as are magic links (`/proc/self/fd/N`);
//! - `O_NOFOLLOW` in `flags` means *no* symlink in any component (`RESOLVE_NO_SYMLINKS`);
//!   without it, symlinks are followed, but only while they resolve beneath the base.
//!
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` does this atomically in the kernel (Linux
//! 5.6+). Where it is missing (`ENOSYS`, or `EPERM` from a seccomp filter) or keeps reporting
//! `EAGAIN` (a rename raced the lookup), a component walk with `openat(O_NOFOLLOW)` does the same
//! one name at a time, reading each symlink and resolving its target on a stack of descriptors.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{openat, openat2, readlinkat, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Symlinks resolved in one open before giving up (the kernel's limit).
const MAX_LINKS: usize = 40;
/// `openat2` returns `EAGAIN` when a rename raced the lookup; retry this often, then walk.
const EAGAIN_RETRIES: usize = 4;

static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Open `rel` (relative; empty means the base itself) beneath `base` with `flags`
/// (`O_CLOEXEC` is always added).
pub fn open_beneath(base: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let flags = flags | OFlags::CLOEXEC;
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        if flags.contains(OFlags::NOFOLLOW) {
            resolve |= ResolveFlags::NO_SYMLINKS;
        }
        for _ in 0..EAGAIN_RETRIES {
            match openat2(base, rel, flags, Mode::empty(), resolve) {
                Ok(fd) => return Ok(fd),
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOSYS | Errno::PERM) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    walk_components(base, rel, flags)
}

/// The fallback: one `openat(O_NOFOLLOW)` per component on a stack of directory descriptors.
pub(crate) fn walk_components(
    base: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
) -> io::Result<OwnedFd> {
    let no_symlinks = flags.contains(OFlags::NOFOLLOW);
    let mut queue: VecDeque<OsString> = VecDeque::new();
    push_components(&mut queue, rel, false)?;
    let mut stack: Vec<OwnedFd> = Vec::new();
    let mut links = 0usize;
    loop {
        let Some(name) = queue.pop_front() else {
            // Only `.` and `..` were left: the directory reached is the answer.
            let at = stack.last().map_or(base, |fd| fd.as_fd());
            return Ok(openat(at, ".", flags | OFlags::NOFOLLOW, Mode::empty())?);
        };
        if name == ".." {
            if stack.pop().is_none() {
                return Err(Errno::XDEV.into());
            }
            continue;
        }
        let at = stack.last().map_or(base, |fd| fd.as_fd());
        let last = queue.iter().all(|n| n == ".");
        let step_flags = if last {
            flags | OFlags::NOFOLLOW
        } else {
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
        };
        match openat(at, &name, step_flags, Mode::empty()) {
            Ok(fd) if last => return Ok(fd),
            Ok(fd) => stack.push(fd),
            Err(err @ (Errno::LOOP | Errno::NOTDIR)) => {
                // A symlink (O_NOFOLLOW refused it), or really not a directory.
                let Ok(target) = readlinkat(at, &name, Vec::new()) else {
                    return Err(err.into());
                };
                if no_symlinks {
                    return Err(Errno::LOOP.into());
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(Errno::LOOP.into());
                }
                let target = OsString::from(std::ffi::OsStr::from_bytes(target.as_bytes()));
                push_components(&mut queue, Path::new(&target), true)?;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Queue `path`'s components (at the front when it is a symlink's target); absolute is refused.
fn push_components(queue: &mut VecDeque<OsString>, path: &Path, front: bool) -> io::Result<()> {
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => parts.push(n.to_os_string()),
            Component::ParentDir => parts.push("..".into()),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err(Errno::XDEV.into()),
        }
    }
    if front {
        for p in parts.into_iter().rev() {
            queue.push_front(p);
        }
    } else {
        queue.extend(parts);
    }
    Ok(())
}
