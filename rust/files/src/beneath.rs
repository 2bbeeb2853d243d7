//! Open files and folders beneath a folder, by descriptor: the one confinement primitive, used
//! by the file tools (through [`Root`]), the search walker, its ignore rules and the index.
//!
//! Every path is resolved relative to an open folder descriptor, never as a string checked first
//! and opened later, so a folder swapped for a symlink by another process cannot move an open
//! outside: the kernel's `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` does it in one
//! call, and where that is missing (Linux < 5.6, `ENOSYS`, or `EPERM` from a seccomp filter,
//! remembered for the process), refuses (absolute symlinks) or gives up (`EAGAIN`, a rename raced
//! the lookup) the same walk is done here one component at a time with `openat(O_NOFOLLOW)` and
//! `readlinkat`, keeping a stack of open folders so `..` never climbs through the file system.
//!
//! The rules, the same on both paths:
//! - symlinks are followed while they stay beneath ([`Links::Follow`]), or refused in every
//!   component ([`Links::Never`]); an absolute link target is accepted only when the folder's own
//!   path is known (a [`Root`]) and the target names a place under it;
//! - `..` past the folder, absolute paths elsewhere and magic links are a [`BeneathError::Escape`]
//!   carrying where the path was heading, so a caller with several roots can try the next one;
//! - a component changed by another process between two of our calls is looked at again, at
//!   most [`MAX_RETRIES`] times.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{mkdirat, openat, readlinkat, AtFlags, Mode, OFlags};
use rustix::io::Errno;
use rustix::process::{Gid, Uid};

/// Symlinks followed in one resolution before giving up (the kernel's own limit).
const MAX_LINKS: usize = 40;
/// Retries of one component when another process changes it between two of our calls.
const MAX_RETRIES: usize = 16;

/// What a resolution does with the symlinks it meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Follow them while they stay beneath; the last one too unless the flags have `O_NOFOLLOW`.
    Follow,
    /// Refuse a symlink in any component (`ELOOP`), as `RESOLVE_NO_SYMLINKS` does.
    Never,
}

impl Links {
    /// What a caller without a known root path means by its flags: with `O_NOFOLLOW`, no
    /// symlink anywhere; without, follow them while they stay beneath.
    fn for_flags(flags: OFlags) -> Self {
        if flags.contains(OFlags::NOFOLLOW) {
            Links::Never
        } else {
            Links::Follow
        }
    }
}

/// Why an open beneath a root failed.
#[derive(Debug)]
pub enum BeneathError {
    /// The path leaves the root; `to` is the absolute place it heads for (lexical).
    Escape {
        /// Where it heads for.
        to: PathBuf,
    },
    /// The system refused it (e.g. no such file, or a link where none may be).
    Io(io::Error),
}

impl From<Errno> for BeneathError {
    fn from(e: Errno) -> Self {
        BeneathError::Io(e.into())
    }
}

impl From<BeneathError> for io::Error {
    fn from(e: BeneathError) -> Self {
        match e {
            BeneathError::Io(e) => e,
            BeneathError::Escape { to } => io::Error::other(format!("leads outside, to {to:?}")),
        }
    }
}

impl BeneathError {
    /// As an `io::Error` whose code says what happened: an escape is `EXDEV`.
    fn into_errno(self) -> io::Error {
        match self {
            BeneathError::Escape { .. } => Errno::XDEV.into(),
            BeneathError::Io(e) => e,
        }
    }
}

/// What to do with folders of the path that do not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Fail with `NotFound`.
    Fail,
    /// Stop there and return the missing folder names (to be made later with [`Parent::make_dirs`]).
    Stop,
}

/// The folder holding a path's last component, open, and that component's name.
#[derive(Debug)]
pub struct Parent {
    /// The deepest existing folder on the way.
    pub dir: OwnedFd,
    /// Folders still to create below `dir` (only with [`Missing::Stop`]), outermost first.
    pub missing: Vec<OsString>,
    /// The last component's name.
    pub name: OsString,
}

/// A folder made by [`Parent::make_dirs`], kept so a failed write can remove it again.
#[derive(Debug)]
pub struct Created {
    parent: OwnedFd,
    name: OsString,
}

/// The owner a new entry in `dir` must be given, if not its creator: root making an entry in a
/// folder another uid owns gives it to the folder's owner (uid and gid). A served tenant's
/// commands run as the uid that owns its workspace, and must be able to change what the file
/// tools made there. Anyone else creates entries as usual (`None`).
pub fn owner_for_new(dir: BorrowedFd<'_>) -> io::Result<Option<(Uid, Gid)>> {
    let me = rustix::process::geteuid();
    if !me.is_root() {
        return Ok(None);
    }
    let folder = rustix::fs::fstat(dir)?;
    Ok((folder.st_uid != me.as_raw())
        .then(|| (Uid::from_raw(folder.st_uid), Gid::from_raw(folder.st_gid))))
}

impl Created {
    /// The folder it was made in (whose entry for it a durable write must sync).
    pub fn parent(&self) -> BorrowedFd<'_> {
        self.parent.as_fd()
    }

    /// Remove the folder again (only if still empty).
    pub fn undo(&self) {
        let _ = rustix::fs::unlinkat(&self.parent, self.name.as_os_str(), AtFlags::REMOVEDIR);
    }
}

impl Parent {
    /// Create the missing folders (by descriptor, `mkdirat`) and move `dir` to the innermost.
    /// Returns what was made, outermost first; a folder made meanwhile by someone else is used.
    pub fn make_dirs(&mut self) -> io::Result<Vec<Created>> {
        let mut made = Vec::new();
        for name in std::mem::take(&mut self.missing) {
            match mkdirat(&self.dir, name.as_os_str(), Mode::from_raw_mode(0o777)) {
                Ok(()) => {
                    made.push(Created {
                        parent: self.dir.try_clone()?,
                        name: name.clone(),
                    });
                    if let Some((uid, gid)) = owner_for_new(self.dir.as_fd())? {
                        let nofollow = AtFlags::SYMLINK_NOFOLLOW;
                        rustix::fs::chownat(
                            &self.dir,
                            name.as_os_str(),
                            Some(uid),
                            Some(gid),
                            nofollow,
                        )?;
                    }
                }
                Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            self.dir = openat(&self.dir, name.as_os_str(), dir_flags(), Mode::empty())?;
        }
        Ok(made)
    }
}

fn dir_flags() -> OFlags {
    crate::os::handle_flags() | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Errors of `openat2` that mean "do it the slow way", not "the answer is no".
fn walk_instead(e: Errno) -> bool {
    // EXDEV: an absolute link or `..` at the top (the walk decides); ENOSYS/EPERM: no openat2
    // (old kernel, seccomp); EAGAIN: a concurrent rename made the kernel give up; ELOOP: let
    // the walk report it with the same rules.
    matches!(
        e,
        Errno::XDEV | Errno::NOSYS | Errno::PERM | Errno::AGAIN | Errno::LOOP
    )
}

/// An open folder that paths are resolved beneath.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

impl Root {
    /// Open `path` (canonicalised once, here) as a root.
    pub fn open(path: &Path) -> io::Result<Self> {
        let path = path.canonicalize()?;
        let fd = openat(
            rustix::fs::CWD,
            path.as_path(),
            crate::os::handle_flags() | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self { fd, path })
    }

    /// A root from a descriptor opened elsewhere (the index daemon's clients send theirs): its
    /// path is the kernel's record of the descriptor, never what the sender says it is.
    pub fn from_fd(fd: OwnedFd) -> io::Result<Self> {
        let path = fd_path(fd.as_fd())?;
        Ok(Self { fd, path })
    }

    /// The canonical path the root had when opened (for messages and absolute link targets).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root's descriptor, to open beneath.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Open `rel` beneath the root with `flags` (`O_CLOEXEC` is added). Symlinks are followed
    /// while they stay beneath, the last one too unless `flags` has `O_NOFOLLOW`.
    pub fn open_at(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, BeneathError> {
        open_in(self.fd(), Some(&self.path), rel, flags, Links::Follow)
    }

    /// The folder holding `rel`'s last component, and that name. With `follow_last`, a symlink
    /// in the last place is followed (a write through it lands on its target); without, the
    /// name is the link itself (delete and move act on links, not on what they point to).
    pub fn parent(
        &self,
        rel: &Path,
        follow_last: bool,
        missing: Missing,
    ) -> Result<Parent, BeneathError> {
        if let (true, Some(dir), Some(name)) =
            (is_plain_relative(rel), rel.parent(), rel.file_name())
        {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            // Folders on the way may be links (followed while they stay beneath).
            let flags = crate::os::handle_flags() | OFlags::DIRECTORY | OFlags::CLOEXEC;
            match kernel_open(self.fd(), dir, flags, Links::Follow) {
                Ok(fd) => {
                    // The fast path only stands when the last name is not itself a link.
                    let is_link = follow_last && readlinkat(&fd, name, Vec::new()).is_ok();
                    if !is_link {
                        return Ok(Parent {
                            dir: fd,
                            missing: Vec::new(),
                            name: name.to_os_string(),
                        });
                    }
                }
                Err(e) if walk_instead(e) || e == Errno::NOENT => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut walk = Walk::new(self.fd(), Some(&self.path), rel, Links::Follow)?;
        walk.parent(follow_last, missing)
    }
}

/// Relative, no `..`, no empty or `.` parts: the kernel's fast path is exact for these.
fn is_plain_relative(rel: &Path) -> bool {
    !rel.as_os_str().is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Open `rel` (relative; empty is the folder itself) beneath the folder `base`, whose path is
/// not needed: symlinks are followed while they stay beneath (an absolute target always leaves),
/// and with `O_NOFOLLOW` in `flags` no component may be a symlink. An escape is `EXDEV`.
pub fn open_beneath(base: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    open_in(base, None, rel, flags, Links::for_flags(flags)).map_err(BeneathError::into_errno)
}

/// The one resolution: the kernel's in one call where it gives the answer, else the walk.
fn open_in(
    base: BorrowedFd<'_>,
    base_path: Option<&Path>,
    rel: &Path,
    flags: OFlags,
    links: Links,
) -> Result<OwnedFd, BeneathError> {
    let flags = flags | OFlags::CLOEXEC;
    if is_plain_relative(rel) {
        match kernel_open(base, rel, flags, links) {
            Ok(fd) => return Ok(fd),
            Err(e)
                if walk_instead(e) && !(e == Errno::LOOP && flags.contains(OFlags::NOFOLLOW)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Walk::new(base, base_path, rel, links)?.open_last(flags)
}

/// `openat2` beneath `base`, or `ENOSYS` where it is missing or known to be unavailable.
fn kernel_open(
    base: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    links: Links,
) -> Result<OwnedFd, Errno> {
    crate::os::openat2_beneath(base, rel, flags, links == Links::Never)
}

/// The walk alone, as it runs where `openat2` is missing (for tests that compare the two).
#[cfg(test)]
pub(crate) fn walk_beneath(base: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    Walk::new(base, None, rel, Links::for_flags(flags))
        .and_then(|mut walk| walk.open_last(flags | OFlags::CLOEXEC))
        .map_err(BeneathError::into_errno)
}

/// Apply `parts` to `base` lexically (`..` pops): where an escaping path was heading.
fn lexical(base: &Path, parts: impl IntoIterator<Item = OsString>) -> PathBuf {
    let mut out = base.to_path_buf();
    for part in parts {
        match part.as_bytes() {
            b"" | b"." => {}
            b".." => {
                out.pop();
            }
            _ => out.push(part),
        }
    }
    out
}

/// `rel` applied to `base` lexically (`..` pops; an absolute `rel` starts again at `/`).
pub fn lexical_join(base: &Path, rel: &Path) -> PathBuf {
    let bytes = rel.as_os_str().as_bytes();
    let base = if bytes.starts_with(b"/") {
        Path::new("/")
    } else {
        base
    };
    lexical(base, split(bytes))
}

fn split(path: &[u8]) -> impl Iterator<Item = OsString> + '_ {
    path.split(|&b| b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .map(|p| OsString::from_vec(p.to_vec()))
}

/// One resolution in progress: the folders opened so far and the names still to walk.
struct Walk<'r> {
    base: BorrowedFd<'r>,
    /// The base folder's path, when known: for messages and absolute link targets.
    base_path: Option<&'r Path>,
    links: Links,
    dirs: Vec<OwnedFd>,
    names: Vec<OsString>,
    /// Components still to resolve, the next one last.
    pending: Vec<OsString>,
    followed: usize,
}

enum Step {
    Entered,
    Link(Vec<u8>),
    NotFound,
}

impl<'r> Walk<'r> {
    fn new(
        base: BorrowedFd<'r>,
        base_path: Option<&'r Path>,
        rel: &Path,
        links: Links,
    ) -> Result<Self, BeneathError> {
        let mut walk = Walk {
            base,
            base_path,
            links,
            dirs: Vec::new(),
            names: Vec::new(),
            pending: Vec::new(),
            followed: 0,
        };
        walk.push_target(rel.as_os_str().as_bytes())?;
        Ok(walk)
    }

    fn cur(&self) -> BorrowedFd<'_> {
        self.dirs.last().map_or(self.base, |d| d.as_fd())
    }

    fn here(&self) -> PathBuf {
        lexical(
            self.base_path.unwrap_or(Path::new("")),
            self.names.iter().cloned(),
        )
    }

    fn escape(&self, base: PathBuf) -> BeneathError {
        let rest = self.pending.iter().rev().cloned();
        BeneathError::Escape {
            to: lexical(&base, rest),
        }
    }

    /// Put a path (the start, or a link's target) in front of what is still to walk.
    fn push_target(&mut self, target: &[u8]) -> Result<(), BeneathError> {
        let mut target = target;
        if target.starts_with(b"/") {
            let abs = Path::new(OsStr::from_bytes(target));
            match self.base_path.map(|base| abs.strip_prefix(base)) {
                Some(Ok(rest)) => {
                    self.dirs.clear();
                    self.names.clear();
                    target = rest.as_os_str().as_bytes();
                }
                _ => {
                    let abs = abs.to_path_buf();
                    return Err(
                        self.escape(lexical(Path::new("/"), split(abs.as_os_str().as_bytes())))
                    );
                }
            }
        }
        let parts: Vec<OsString> = split(target).collect();
        self.pending.extend(parts.into_iter().rev());
        Ok(())
    }

    fn follow(&mut self, target: Vec<u8>) -> Result<(), BeneathError> {
        self.followed += 1;
        if self.links == Links::Never || self.followed > MAX_LINKS {
            return Err(Errno::LOOP.into());
        }
        self.push_target(&target)
    }

    fn up(&mut self) -> Result<(), BeneathError> {
        if self.names.pop().is_none() {
            let above = match self.base_path {
                Some(base) => base.parent().unwrap_or(Path::new("/")).to_path_buf(),
                None => PathBuf::from(".."),
            };
            return Err(self.escape(above));
        }
        self.dirs.pop();
        Ok(())
    }

    /// Enter folder `name` of the current folder, or say it is a link or missing.
    fn enter(&mut self, name: &OsStr) -> Result<Step, BeneathError> {
        for _ in 0..MAX_RETRIES {
            match openat(self.cur(), name, dir_flags(), Mode::empty()) {
                Ok(fd) => {
                    self.dirs.push(fd);
                    self.names.push(name.to_os_string());
                    return Ok(Step::Entered);
                }
                Err(Errno::NOTDIR | Errno::LOOP) => {
                    match readlinkat(self.cur(), name, Vec::new()) {
                        Ok(t) => return Ok(Step::Link(t.into_bytes())),
                        Err(Errno::INVAL) => return Err(Errno::NOTDIR.into()),
                        Err(Errno::NOENT) => continue, // changed under us: look again
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(Errno::NOENT) => return Ok(Step::NotFound),
                Err(e) => return Err(e.into()),
            }
        }
        Err(Errno::AGAIN.into())
    }

    /// Walk every pending component but the last; `Some(missing)` when a folder is absent and
    /// `missing` is `Stop` (the rest, lexically, outermost first).
    fn walk_dirs(&mut self, missing: Missing) -> Result<Option<Vec<OsString>>, BeneathError> {
        while self.pending.len() > 1 {
            let name = self.pending.pop().expect("len checked");
            if name == ".." {
                self.up()?;
                continue;
            }
            match self.enter(&name)? {
                Step::Entered => {}
                Step::Link(t) => self.follow(t)?,
                Step::NotFound if missing == Missing::Stop => {
                    let mut rest = vec![name];
                    while self.pending.len() > 1 {
                        let part = self.pending.pop().expect("len checked");
                        if part == ".." {
                            // `new/../x` with `new` missing: the kernel would fail too.
                            rest.pop().ok_or(BeneathError::Io(Errno::NOENT.into()))?;
                        } else {
                            rest.push(part);
                        }
                    }
                    return Ok(Some(rest));
                }
                Step::NotFound => return Err(Errno::NOENT.into()),
            }
        }
        Ok(None)
    }

    fn open_last(&mut self, flags: OFlags) -> Result<OwnedFd, BeneathError> {
        loop {
            self.walk_dirs(Missing::Fail)?;
            let Some(name) = self.pending.pop() else {
                return Ok(openat(self.cur(), ".", flags, Mode::empty())?);
            };
            if name == ".." {
                self.up()?;
                continue;
            }
            match openat(
                self.cur(),
                name.as_os_str(),
                flags | OFlags::NOFOLLOW,
                Mode::empty(),
            ) {
                Ok(fd) => return Ok(fd),
                Err(Errno::LOOP | Errno::NOTDIR) if !flags.contains(OFlags::NOFOLLOW) => {
                    match readlinkat(self.cur(), name.as_os_str(), Vec::new()) {
                        Ok(t) => self.follow(t.into_bytes())?,
                        Err(Errno::INVAL) => return Err(Errno::NOTDIR.into()),
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn parent(&mut self, follow_last: bool, missing: Missing) -> Result<Parent, BeneathError> {
        loop {
            let absent = self.walk_dirs(missing)?;
            let Some(name) = self.pending.pop() else {
                return Err(Errno::ISDIR.into());
            };
            if name == ".." {
                return Err(Errno::ISDIR.into());
            }
            let dir = self.cur().try_clone_to_owned().map_err(BeneathError::Io)?;
            if let Some(missing) = absent {
                return Ok(Parent { dir, missing, name });
            }
            if follow_last {
                if let Ok(t) = readlinkat(&dir, name.as_os_str(), Vec::new()) {
                    self.follow(t.into_bytes())?;
                    continue;
                }
            }
            return Ok(Parent {
                dir,
                missing: Vec::new(),
                name,
            });
        }
    }
}

impl Root {
    /// Where `rel` would resolve, as a path (for messages and for callers that need a path):
    /// the real location of the deepest existing folder, plus the missing rest.
    pub fn locate(&self, rel: &Path) -> Result<PathBuf, BeneathError> {
        let mut walk = Walk::new(self.fd(), Some(&self.path), rel, Links::Follow)?;
        if walk.pending.is_empty() {
            return Ok(self.path.clone());
        }
        let p = walk.parent(true, Missing::Stop)?;
        let mut out = fd_path(p.dir.as_fd()).unwrap_or_else(|_| walk.here());
        out.extend(p.missing.iter());
        out.push(&p.name);
        Ok(out)
    }
}

/// The kernel's current path of an open descriptor (Linux: `/proc/self/fd`).
pub fn fd_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, Root) {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(ws.join("a/b/f.txt"), "f").unwrap();
        std::fs::write(d.path().join("secret"), "s").unwrap();
        symlink("a/b", ws.join("rel")).unwrap();
        symlink(ws.join("a/b/f.txt"), ws.join("abs")).unwrap();
        symlink(d.path().join("secret"), ws.join("out")).unwrap();
        symlink("../..", ws.join("a/up")).unwrap();
        let root = Root::open(&ws).unwrap();
        (d, root)
    }

    fn read(root: &Root, rel: &str) -> Result<String, BeneathError> {
        let fd = root.open_at(Path::new(rel), OFlags::RDONLY)?;
        let f = std::fs::File::from(fd);
        Ok(std::io::read_to_string(f).unwrap())
    }

    #[test]
    fn open_beneath_refuses_every_way_out() {
        use rustix::fs::Mode;
        use std::os::fd::AsFd;
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("a.py"), "needle\n").unwrap();
        std::fs::write(ws.join("src/lib.rs"), "fn needle() {}\n").unwrap();
        std::fs::write(d.path().join("outside.txt"), "secret\n").unwrap();
        symlink(d.path().join("outside.txt"), ws.join("abs_out")).unwrap();
        symlink("../outside.txt", ws.join("rel_out")).unwrap();
        symlink("src/lib.rs", ws.join("rel_in")).unwrap();
        symlink("../a.py", ws.join("src/back_in")).unwrap();
        let root = rustix::fs::open(
            &ws,
            crate::os::handle_flags() | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        let read = OFlags::RDONLY;
        let nofollow = OFlags::RDONLY | OFlags::NOFOLLOW;
        type Open = fn(BorrowedFd<'_>, &Path, OFlags) -> io::Result<OwnedFd>;
        for open in [open_beneath as Open, walk_beneath as Open] {
            for escape in [
                "../outside.txt",
                "/etc/passwd",
                "abs_out",
                "rel_out",
                "src/../../x",
            ] {
                assert!(
                    open(root.as_fd(), Path::new(escape), read).is_err(),
                    "{escape}"
                );
            }
            assert!(open(root.as_fd(), Path::new("rel_in"), read).is_ok());
            assert!(open(root.as_fd(), Path::new("rel_in"), nofollow).is_err());
            assert!(open(root.as_fd(), Path::new("src/lib.rs"), nofollow).is_ok());
            // A link that goes up and comes back in stays beneath the root.
            assert!(open(root.as_fd(), Path::new("src/back_in"), read).is_ok());
            assert!(open(root.as_fd(), Path::new(""), read | OFlags::DIRECTORY).is_ok());
        }
    }

    #[test]
    fn links_beneath_are_followed_and_escapes_refused() {
        let (_d, root) = tree();
        assert_eq!(read(&root, "a/b/f.txt").unwrap(), "f");
        assert_eq!(read(&root, "rel/f.txt").unwrap(), "f");
        assert_eq!(read(&root, "abs").unwrap(), "f");
        assert_eq!(read(&root, "a/b/../b/f.txt").unwrap(), "f");
        for bad in ["out", "../secret", "a/up/secret", "a/../../secret"] {
            match read(&root, bad) {
                Err(BeneathError::Escape { to }) => {
                    assert!(to.ends_with("secret"), "{bad}: {to:?}")
                }
                other => panic!("{bad}: {:?}", other.map(|_| ())),
            }
        }
    }

    #[test]
    fn parent_follows_or_keeps_the_last_link() {
        let (_d, root) = tree();
        let p = root.parent(Path::new("abs"), true, Missing::Fail).unwrap();
        assert_eq!(p.name, "f.txt");
        let p = root.parent(Path::new("abs"), false, Missing::Fail).unwrap();
        assert_eq!(p.name, "abs");
        let mut p = root
            .parent(Path::new("n1/n2/x"), true, Missing::Stop)
            .unwrap();
        assert_eq!(p.missing, vec![OsString::from("n1"), OsString::from("n2")]);
        let made = p.make_dirs().unwrap();
        assert_eq!(made.len(), 2);
        assert!(root.path().join("n1/n2").is_dir());
        for c in made.iter().rev() {
            c.undo();
        }
        assert!(!root.path().join("n1").exists());
        assert!(matches!(
            root.parent(Path::new("out/x"), true, Missing::Stop),
            Err(BeneathError::Escape { .. })
        ));
    }

    /// The component walk alone (what runs where openat2 is missing) gives the same answers.
    #[test]
    fn the_walk_alone_matches_the_kernel() {
        let (_d, root) = tree();
        for (rel, want) in [
            ("a/b/f.txt", Some("f")),
            ("rel/f.txt", Some("f")),
            ("abs", Some("f")),
            ("out", None),
            ("a/up/secret", None),
        ] {
            let got = Walk::new(root.fd(), Some(root.path()), Path::new(rel), Links::Follow)
                .and_then(|mut w| w.open_last(OFlags::RDONLY | OFlags::CLOEXEC));
            match (got, want) {
                (Ok(fd), Some(text)) => assert_eq!(
                    std::io::read_to_string(std::fs::File::from(fd)).unwrap(),
                    text
                ),
                (Err(BeneathError::Escape { .. }), None) => {}
                (other, _) => panic!("{rel}: {:?}", other.map(|_| ())),
            }
        }
        let p = Walk::new(
            root.fd(),
            Some(root.path()),
            Path::new("rel/new/x"),
            Links::Follow,
        )
        .and_then(|mut w| w.parent(true, Missing::Stop))
        .unwrap();
        assert_eq!(
            (p.missing, p.name),
            (vec![OsString::from("new")], OsString::from("x"))
        );
        let nofollow = Walk::new(
            root.fd(),
            Some(root.path()),
            Path::new("abs"),
            Links::Follow,
        )
        .and_then(|mut w| w.open_last(OFlags::RDONLY | OFlags::NOFOLLOW));
        assert!(
            matches!(nofollow, Err(BeneathError::Io(e)) if e.raw_os_error() == Some(libc::ELOOP))
        );
    }

    #[test]
    fn locate_reports_real_places() {
        let (_d, root) = tree();
        assert_eq!(
            root.locate(Path::new("rel/f.txt")).unwrap(),
            root.path().join("a/b/f.txt")
        );
        assert_eq!(
            root.locate(Path::new("new/x")).unwrap(),
            root.path().join("new/x")
        );
    }
}
