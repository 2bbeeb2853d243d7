//! Confinement shared by every built-in tool that touches the file system.
//!
//! A path is taken relative to the workspace root (or, when absolute, to the root it names) and
//! resolved by descriptor beneath that root ([`crate::beneath`]): `..` and symlinks are followed
//! the way the kernel would, but the walk can only end inside the workspace root or, for reads
//! only, inside one of the read-only roots. Nothing is checked as a string and then used again:
//! what is opened is what was resolved. Roots themselves are opened once, in [`Roots::new`].

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::OFlags;

use crate::beneath::{fd_path, lexical_join, BeneathError, Missing, Parent, Root};
use crate::error::{ConfineError, FsError};

/// What a caller wants to do with a path: writes are allowed only under the workspace root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading (any root).
    Read,
    /// Writing (the workspace, outside its read-only roots).
    Write,
}

#[derive(Debug)]
struct Inner {
    /// Index 0 is the workspace, then the read-only roots.
    roots: Vec<Root>,
    read_only: Vec<PathBuf>,
    /// Read-only roots inside the workspace: writes below them are refused too.
    nested_read_only: Vec<PathBuf>,
}

/// The open roots of one context (cheap to clone: shared).
#[derive(Debug, Clone)]
pub struct Roots(Arc<Inner>);

/// Hops from one root to another (absolute links from the workspace into a read-only root).
const MAX_HOPS: usize = 8;

fn open_root(root: &Path) -> Result<Root, ConfineError> {
    Root::open(root).map_err(|source| ConfineError::BadRoot {
        root: root.to_path_buf(),
        source,
    })
}

impl Roots {
    /// Open the workspace root and the read-only roots (a root that cannot be opened is an error).
    pub fn new(workspace: &Path, read_only: &[PathBuf]) -> Result<Self, ConfineError> {
        let mut roots = vec![open_root(workspace)?];
        for r in read_only {
            roots.push(open_root(r)?);
        }
        let ws = roots[0].path().to_path_buf();
        let read_only: Vec<PathBuf> = roots[1..].iter().map(|r| r.path().to_path_buf()).collect();
        let nested_read_only = read_only
            .iter()
            .filter(|r| r.starts_with(&ws))
            .cloned()
            .collect();
        Ok(Self(Arc::new(Inner {
            roots,
            read_only,
            nested_read_only,
        })))
    }

    /// One open root and nothing else (the index daemon serves one root per request).
    pub fn of_root(root: Root) -> Self {
        Self(Arc::new(Inner {
            roots: vec![root],
            read_only: Vec::new(),
            nested_read_only: Vec::new(),
        }))
    }

    /// The workspace root's canonical path.
    pub fn workspace(&self) -> &Path {
        self.0.roots[0].path()
    }

    /// The workspace root, open: writes and the transaction journal work beneath it.
    pub fn workspace_root(&self) -> &Root {
        &self.0.roots[0]
    }

    /// The read-only roots' canonical paths.
    pub fn read_only(&self) -> &[PathBuf] {
        &self.0.read_only
    }

    fn describe(&self) -> String {
        let mut parts = vec![format!("workspace {:?}", self.workspace())];
        parts.extend(self.0.read_only.iter().map(|r| format!("read-only {r:?}")));
        parts.join(", ")
    }

    /// The root an absolute path lies under (the deepest one), and the rest of the path.
    fn root_of(&self, abs: &Path) -> Option<(usize, PathBuf)> {
        self.0
            .roots
            .iter()
            .enumerate()
            .filter_map(|(i, r)| abs.strip_prefix(r.path()).ok().map(|rest| (i, r, rest)))
            .max_by_key(|(_, r, _)| r.path().as_os_str().len())
            .map(|(i, _, rest)| (i, rest.to_path_buf()))
    }

    fn outside(&self, shown: &str, resolved: PathBuf) -> ConfineError {
        ConfineError::Outside {
            path: shown.to_string(),
            resolved,
            roots: self.describe(),
        }
    }

    fn read_only_hit(&self, shown: &str, resolved: PathBuf) -> Option<ConfineError> {
        let root = self.0.read_only.iter().find(|r| resolved.starts_with(r))?;
        Some(ConfineError::ReadOnly {
            path: shown.to_string(),
            resolved,
            root: root.clone(),
            workspace: self.workspace().to_path_buf(),
        })
    }

    /// Where a user-supplied path starts: (root index, path relative to it).
    fn start(&self, path: &str) -> Result<(usize, PathBuf), ConfineError> {
        if path.is_empty() {
            return Err(ConfineError::Empty);
        }
        if path.contains('\0') {
            return Err(ConfineError::Nul(path.to_string()));
        }
        let p = Path::new(path);
        if p.is_absolute() {
            return self
                .root_of(p)
                .ok_or_else(|| self.outside(path, p.to_path_buf()));
        }
        Ok((0, p.to_path_buf()))
    }

    /// Map an escape from root `from` to the next root to try, or the refusal.
    fn hop(
        &self,
        shown: &str,
        to: PathBuf,
        access: Access,
    ) -> Result<(usize, PathBuf), ConfineError> {
        match self.root_of(&to) {
            Some((0, rest)) => Ok((0, rest)),
            Some((i, rest)) if access == Access::Read => Ok((i, rest)),
            Some(_) => Err(self
                .read_only_hit(shown, to.clone())
                .unwrap_or_else(|| self.outside(shown, to))),
            None => Err(self.outside(shown, to)),
        }
    }

    /// A missing folder on the way (`new/../../x`) fails in the kernel before the escape shows;
    /// name the escape anyway when the path, taken lexically, leaves the roots.
    fn io_or_outside(
        &self,
        action: &'static str,
        shown: &str,
        i: usize,
        rel: &Path,
        e: io::Error,
    ) -> FsError {
        if e.kind() == io::ErrorKind::NotFound {
            let lexical = lexical_join(self.0.roots[i].path(), rel);
            if self.root_of(&lexical).is_none() {
                return self.outside(shown, lexical).into();
            }
        }
        FsError::from_io(action, shown, e)
    }

    /// Why a write to `rel` under read-only root `i` is refused.
    fn write_refusal(&self, shown: &str, i: usize, rel: &Path) -> ConfineError {
        let to = self.0.roots[i].path().join(rel);
        self.read_only_hit(shown, to.clone())
            .unwrap_or_else(|| self.outside(shown, to))
    }

    /// Refuse a write whose folder lies in a read-only root nested in the workspace.
    fn check_nested(&self, shown: &str, dir: &OwnedFd, name: &OsString) -> Result<(), FsError> {
        if self.0.nested_read_only.is_empty() {
            return Ok(());
        }
        use std::os::fd::AsFd;
        let real = fd_path(dir.as_fd())
            .map_err(|e| FsError::io("resolve", shown, e))?
            .join(name);
        match self.read_only_hit(shown, real) {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Open a user-supplied path beneath the roots (`access` says which roots count). `flags`
    /// are `openat` flags; add `O_NOFOLLOW` to refuse a symlink in the last place.
    pub fn open(&self, shown: &str, access: Access, flags: OFlags) -> Result<OwnedFd, FsError> {
        self.open_in_root(shown, access, flags).map(|(fd, _)| fd)
    }

    /// [`Roots::open`], also naming the root the path was found beneath (the search walker
    /// confines its walk to it).
    pub fn open_in_root(
        &self,
        shown: &str,
        access: Access,
        flags: OFlags,
    ) -> Result<(OwnedFd, &Root), FsError> {
        let (mut i, mut rel) = self.start(shown)?;
        for _ in 0..MAX_HOPS {
            if access == Access::Write && i != 0 {
                return Err(self.write_refusal(shown, i, &rel).into());
            }
            match self.0.roots[i].open_at(&rel, flags) {
                Ok(fd) => {
                    if access == Access::Write {
                        self.check_nested(shown, &fd, &OsString::new())?;
                    }
                    return Ok((fd, &self.0.roots[i]));
                }
                Err(BeneathError::Escape { to }) => (i, rel) = self.hop(shown, to, access)?,
                Err(BeneathError::Io(e)) => {
                    return Err(self.io_or_outside("open", shown, i, &rel, e))
                }
            }
        }
        Err(FsError::io(
            "open",
            shown,
            io::Error::other("too many symlinks between roots"),
        ))
    }

    /// The workspace folder (open) and name a write to `shown` goes to. `follow_last`: write
    /// through a symlink in the last place to its target (which must be inside too).
    pub fn parent(&self, shown: &str, follow_last: bool) -> Result<Parent, FsError> {
        let (i, rel) = self.start(shown)?;
        if i != 0 {
            return Err(self.write_refusal(shown, i, &rel).into());
        }
        let parent = match self.0.roots[0].parent(&rel, follow_last, Missing::Stop) {
            Ok(p) => p,
            Err(BeneathError::Escape { to }) => {
                // Landing back in the workspace by an absolute link is fine: walk from there.
                let (j, rest) = self.hop(shown, to, Access::Write)?;
                debug_assert_eq!(j, 0);
                self.0.roots[0]
                    .parent(&rest, follow_last, Missing::Stop)
                    .map_err(|e| match e {
                        BeneathError::Escape { to } => self.outside(shown, to).into(),
                        BeneathError::Io(e) => FsError::from_io("resolve", shown, e),
                    })?
            }
            Err(BeneathError::Io(e)) => {
                return Err(self.io_or_outside("resolve", shown, 0, &rel, e))
            }
        };
        self.check_nested(shown, &parent.dir, &parent.name)?;
        Ok(parent)
    }

    /// Resolve a user-supplied path to the place it names (for display and for callers that
    /// need a path); raises the same refusals as opening it would.
    pub fn resolve(&self, path: &str, access: Access) -> Result<PathBuf, ConfineError> {
        let (mut i, mut rel) = self.start(path)?;
        for _ in 0..MAX_HOPS {
            if access == Access::Write && i != 0 {
                return Err(self.write_refusal(path, i, &rel));
            }
            match self.0.roots[i].locate(&rel) {
                Ok(real) => return self.check_resolved(path, real, access),
                Err(BeneathError::Escape { to }) => (i, rel) = self.hop(path, to, access)?,
                Err(BeneathError::Io(source)) => {
                    return Err(ConfineError::Io {
                        path: path.to_string(),
                        source,
                    })
                }
            }
        }
        Err(ConfineError::Io {
            path: path.to_string(),
            source: io::Error::other("too many symlinks between roots"),
        })
    }

    /// Check an already resolved, absolute path against the roots.
    pub fn check_resolved(
        &self,
        shown: &str,
        resolved: PathBuf,
        access: Access,
    ) -> Result<PathBuf, ConfineError> {
        let ro_hit = self.0.read_only.iter().any(|r| resolved.starts_with(r));
        let in_workspace = resolved.starts_with(self.workspace());
        match access {
            Access::Read if in_workspace || ro_hit => Ok(resolved),
            // A read-only root nested inside the workspace stays read-only.
            Access::Write if in_workspace && !ro_hit => Ok(resolved),
            Access::Write if ro_hit => Err(self
                .read_only_hit(shown, resolved)
                .expect("read-only hit checked above")),
            _ => Err(self.outside(shown, resolved)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Roots, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let ro = dir.path().join("ro");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(&ro).unwrap();
        std::fs::write(ws.join("a.txt"), "a").unwrap();
        std::fs::write(ro.join("r.txt"), "r").unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        let roots = Roots::new(&ws, &[ro]).unwrap();
        let base = dir.path().canonicalize().unwrap();
        (dir, roots, base)
    }

    #[test]
    fn relative_and_new_paths_inside() {
        let (_d, r, base) = setup();
        assert_eq!(
            r.resolve("a.txt", Access::Read).unwrap(),
            base.join("ws/a.txt")
        );
        assert_eq!(
            r.resolve("new/deeper/f.txt", Access::Write).unwrap(),
            base.join("ws/new/deeper/f.txt")
        );
        assert_eq!(
            r.resolve("sub/../a.txt", Access::Write).unwrap(),
            base.join("ws/a.txt")
        );
    }

    #[test]
    fn dotdot_and_absolute_escapes_refused() {
        let (_d, r, base) = setup();
        assert!(matches!(
            r.resolve("../secret", Access::Read),
            Err(ConfineError::Outside { .. })
        ));
        let abs = base.join("secret");
        assert!(matches!(
            r.resolve(abs.to_str().unwrap(), Access::Read),
            Err(ConfineError::Outside { .. })
        ));
        assert!(r.resolve("/etc/passwd", Access::Read).is_err());
        let inside = base.join("ws/a.txt");
        assert!(r.resolve(inside.to_str().unwrap(), Access::Write).is_ok());
        assert!(matches!(
            r.open("../secret", Access::Read, OFlags::RDONLY),
            Err(FsError::Denied(ConfineError::Outside { .. }))
        ));
    }

    #[test]
    fn symlink_escapes_refused() {
        let (_d, r, base) = setup();
        symlink(base.join("secret"), base.join("ws/link")).unwrap();
        symlink(&base, base.join("ws/dirlink")).unwrap();
        for p in ["link", "dirlink/secret"] {
            assert!(matches!(
                r.resolve(p, Access::Read),
                Err(ConfineError::Outside { .. })
            ));
            assert!(matches!(
                r.open(p, Access::Read, OFlags::RDONLY),
                Err(FsError::Denied(ConfineError::Outside { .. }))
            ));
        }
        assert!(matches!(
            r.parent("dirlink/newfile", true),
            Err(FsError::Denied(ConfineError::Outside { .. }))
        ));
    }

    #[test]
    fn read_only_roots_are_read_only() {
        let (_d, r, base) = setup();
        let ro = base.join("ro/r.txt");
        assert!(r.resolve(ro.to_str().unwrap(), Access::Read).is_ok());
        assert!(r
            .open(ro.to_str().unwrap(), Access::Read, OFlags::RDONLY)
            .is_ok());
        assert!(matches!(
            r.resolve(ro.to_str().unwrap(), Access::Write),
            Err(ConfineError::ReadOnly { .. })
        ));
        symlink(base.join("ro"), base.join("ws/rolink")).unwrap();
        assert!(r.open("rolink/r.txt", Access::Read, OFlags::RDONLY).is_ok());
        assert!(matches!(
            r.parent("rolink/r.txt", true),
            Err(FsError::Denied(ConfineError::ReadOnly { .. }))
        ));
    }

    #[test]
    fn nested_read_only_root_stays_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("vendor")).unwrap();
        let r = Roots::new(&ws, &[ws.join("vendor")]).unwrap();
        assert!(matches!(
            r.parent("vendor/x.txt", true),
            Err(FsError::Denied(ConfineError::ReadOnly { .. }))
        ));
        assert!(r.parent("x.txt", true).is_ok());
    }

    #[test]
    fn bad_input() {
        let (_d, r, _) = setup();
        assert!(matches!(
            r.resolve("", Access::Read),
            Err(ConfineError::Empty)
        ));
        assert!(matches!(
            r.resolve("a\0b", Access::Read),
            Err(ConfineError::Nul(_))
        ));
        assert!(Roots::new(Path::new("/definitely/missing"), &[]).is_err());
    }
}
