//! Path confinement shared by every built-in tool that touches the file system.
//!
//! A path is joined to the workspace root when relative, then resolved the way the kernel would
//! (`..`, symlinks and symlinked parents followed) and must land inside the workspace root or,
//! for reads only, inside one of the read-only roots. Roots themselves are canonicalised once.

use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("{path:?} resolves to {resolved:?}, which is outside the allowed roots ({roots})")]
    Outside {
        path: String,
        resolved: PathBuf,
        roots: String,
    },
    #[error("{path:?} resolves to {resolved:?}, inside the read-only root {root:?}; writes are only allowed under the workspace root {workspace:?}")]
    ReadOnly {
        path: String,
        resolved: PathBuf,
        root: PathBuf,
        workspace: PathBuf,
    },
    #[error("root {root:?} cannot be used: {source}")]
    BadRoot { root: PathBuf, source: io::Error },
    #[error("cannot resolve {path:?}: {source}")]
    Io { path: String, source: io::Error },
    #[error("path must not be empty")]
    Empty,
    #[error("path {0:?} contains a NUL byte")]
    Nul(String),
}

#[derive(Debug, Clone)]
pub struct Roots {
    workspace: PathBuf,
    read_only: Vec<PathBuf>,
}

fn canonical_root(root: &Path) -> Result<PathBuf, ConfineError> {
    let canon = root
        .canonicalize()
        .map_err(|source| ConfineError::BadRoot {
            root: root.to_path_buf(),
            source,
        })?;
    if !canon.is_dir() {
        let source = io::Error::new(io::ErrorKind::NotADirectory, "not a directory");
        return Err(ConfineError::BadRoot {
            root: root.to_path_buf(),
            source,
        });
    }
    Ok(canon)
}

/// Resolve the longest existing prefix with the kernel, then apply the rest lexically: the rest
/// does not exist yet, so it holds no symlinks, and `..` there only undoes a name just added.
fn resolve_lenient(path: &Path) -> io::Result<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(canon) => {
                let mut out = canon;
                for part in rest.iter().rev() {
                    match Path::new(part).components().next() {
                        Some(Component::ParentDir) => {
                            out.pop();
                        }
                        Some(Component::CurDir) | None => {}
                        _ => out.push(part),
                    }
                }
                return Ok(out);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let name = existing.file_name().map(|n| n.to_os_string());
                let parent = existing.parent().map(Path::to_path_buf);
                match (name, parent) {
                    (Some(n), Some(p)) => {
                        rest.push(n);
                        existing = p;
                    }
                    // `..` as the last component: fold it into the parent lexically.
                    (None, Some(p)) if existing.ends_with("..") => {
                        rest.push("..".into());
                        existing = p;
                    }
                    _ => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

impl Roots {
    pub fn new(workspace: &Path, read_only: &[PathBuf]) -> Result<Self, ConfineError> {
        let workspace = canonical_root(workspace)?;
        let read_only = read_only
            .iter()
            .map(|r| canonical_root(r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            workspace,
            read_only,
        })
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn read_only(&self) -> &[PathBuf] {
        &self.read_only
    }

    fn describe(&self) -> String {
        let mut parts = vec![format!("workspace {:?}", self.workspace)];
        parts.extend(self.read_only.iter().map(|r| format!("read-only {r:?}")));
        parts.join(", ")
    }

    /// Check an already resolved, absolute path against the roots.
    pub fn check_resolved(
        &self,
        shown: &str,
        resolved: PathBuf,
        access: Access,
    ) -> Result<PathBuf, ConfineError> {
        let ro_hit = self.read_only.iter().find(|r| resolved.starts_with(r));
        let in_workspace = resolved.starts_with(&self.workspace);
        match access {
            Access::Read if in_workspace || ro_hit.is_some() => Ok(resolved),
            // A read-only root nested inside the workspace stays read-only.
            Access::Write if in_workspace && ro_hit.is_none() => Ok(resolved),
            Access::Write if ro_hit.is_some() => Err(ConfineError::ReadOnly {
                path: shown.to_string(),
                resolved,
                root: ro_hit.cloned().unwrap_or_default(),
                workspace: self.workspace.clone(),
            }),
            _ => Err(ConfineError::Outside {
                path: shown.to_string(),
                resolved,
                roots: self.describe(),
            }),
        }
    }

    /// Resolve a user-supplied path (relative to the workspace, or absolute) and confine it.
    pub fn resolve(&self, path: &str, access: Access) -> Result<PathBuf, ConfineError> {
        if path.is_empty() {
            return Err(ConfineError::Empty);
        }
        if path.contains('\0') {
            return Err(ConfineError::Nul(path.to_string()));
        }
        let joined = self.workspace.join(path);
        let resolved = resolve_lenient(&joined).map_err(|source| ConfineError::Io {
            path: path.to_string(),
            source,
        })?;
        self.check_resolved(path, resolved, access)
    }

    /// After opening, confirm the open file is still inside the roots (a symlink swapped between
    /// the check and the open is caught here, since the kernel reports where the fd really is).
    pub fn verify_open(
        &self,
        shown: &str,
        file: &File,
        access: Access,
    ) -> Result<PathBuf, ConfineError> {
        let real = fd_path(file).map_err(|source| ConfineError::Io {
            path: shown.to_string(),
            source,
        })?;
        self.check_resolved(shown, real, access)
    }
}

#[cfg(target_os = "linux")]
fn fd_path(file: &File) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

#[cfg(not(target_os = "linux"))]
fn fd_path(_file: &File) -> io::Result<PathBuf> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "cannot read an fd's path on this platform",
    ))
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
        assert_eq!(
            r.resolve("new/../x", Access::Write).unwrap(),
            base.join("ws/x")
        );
    }

    #[test]
    fn dotdot_and_absolute_escapes_refused() {
        let (_d, r, base) = setup();
        assert!(matches!(
            r.resolve("../secret", Access::Read),
            Err(ConfineError::Outside { .. })
        ));
        assert!(matches!(
            r.resolve("new/../../secret", Access::Write),
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
    }

    #[test]
    fn symlink_escapes_refused() {
        let (_d, r, base) = setup();
        symlink(base.join("secret"), base.join("ws/link")).unwrap();
        symlink(&base, base.join("ws/dirlink")).unwrap();
        assert!(matches!(
            r.resolve("link", Access::Read),
            Err(ConfineError::Outside { .. })
        ));
        assert!(matches!(
            r.resolve("dirlink/secret", Access::Read),
            Err(ConfineError::Outside { .. })
        ));
        assert!(matches!(
            r.resolve("dirlink/newfile", Access::Write),
            Err(ConfineError::Outside { .. })
        ));
    }

    #[test]
    fn read_only_roots_are_read_only() {
        let (_d, r, base) = setup();
        let ro = base.join("ro/r.txt");
        assert!(r.resolve(ro.to_str().unwrap(), Access::Read).is_ok());
        assert!(matches!(
            r.resolve(ro.to_str().unwrap(), Access::Write),
            Err(ConfineError::ReadOnly { .. })
        ));
        symlink(base.join("ro"), base.join("ws/rolink")).unwrap();
        assert!(r.resolve("rolink/r.txt", Access::Read).is_ok());
        assert!(matches!(
            r.resolve("rolink/r.txt", Access::Write),
            Err(ConfineError::ReadOnly { .. })
        ));
    }

    #[test]
    fn swapped_symlink_caught_after_open() {
        let (_d, r, base) = setup();
        let checked = r.resolve("swap", Access::Read);
        assert!(checked.is_ok());
        symlink(base.join("secret"), base.join("ws/swap")).unwrap();
        let f = File::open(base.join("ws/swap")).unwrap();
        assert!(matches!(
            r.verify_open("swap", &f, Access::Read),
            Err(ConfineError::Outside { .. })
        ));
        let ok = File::open(base.join("ws/a.txt")).unwrap();
        assert!(r.verify_open("a.txt", &ok, Access::Read).is_ok());
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
