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

/// Failures of the confined file helpers below: a refused path, or a file-system problem.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error(transparent)]
    Denied(#[from] ConfineError),
    #[error("{path}: no such file")]
    NotFound { path: String },
    #[error("{path} is a directory, not a file")]
    IsDir { path: String },
    #[error("{path} is {size} bytes, over the {limit}-byte limit for this tool")]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error(
        "{path} already exists (mode \"create\" never overwrites; use \"overwrite\" or \"append\")"
    )]
    Exists { path: String },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        source: io::Error,
    },
}

impl FsError {
    fn io(action: &'static str, path: &str, source: io::Error) -> Self {
        FsError::Io {
            action,
            path: path.to_string(),
            source,
        }
    }
}

/// A file's bytes and permission bits, as read before changing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    pub bytes: Vec<u8>,
    pub mode: u32,
}

/// Mode bits asked for when creating a new file; the kernel applies the umask.
const NEW_FILE_MODE: u32 = 0o666;

impl Roots {
    /// Open a resolved path for reading: a regular file (checked before opening, since opening a
    /// FIFO or device could block) whose opened fd is still inside the roots (checked after, so a
    /// symlink swapped in between is caught). `Ok(None)` when nothing exists there.
    fn open_regular(
        &self,
        shown: &str,
        resolved: &Path,
        access: Access,
    ) -> Result<Option<(File, std::fs::Metadata)>, FsError> {
        if !check_regular(shown, resolved)? {
            return Ok(None);
        }
        let file = match File::open(resolved) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(FsError::io("open", shown, e)),
        };
        self.verify_open(shown, &file, access)?;
        let meta = file.metadata().map_err(|e| FsError::io("stat", shown, e))?;
        if meta.is_dir() {
            return Err(FsError::IsDir {
                path: shown.to_string(),
            });
        }
        if !meta.is_file() {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "not a regular file");
            return Err(FsError::io("read", shown, e));
        }
        Ok(Some((file, meta)))
    }

    /// Read a resolved path after checking, on the opened fd, that it is still inside the roots.
    /// `Ok(None)` when nothing exists there.
    pub fn read_existing(
        &self,
        shown: &str,
        resolved: &Path,
        access: Access,
        max_bytes: u64,
    ) -> Result<Option<Existing>, FsError> {
        use std::io::Read;
        use std::os::unix::fs::PermissionsExt;
        let Some((mut file, meta)) = self.open_regular(shown, resolved, access)? else {
            return Ok(None);
        };
        if meta.len() > max_bytes {
            return Err(FsError::TooLarge {
                path: shown.to_string(),
                size: meta.len(),
                limit: max_bytes,
            });
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut bytes)
            .map_err(|e| FsError::io("read", shown, e))?;
        Ok(Some(Existing {
            bytes,
            mode: meta.permissions().mode() & 0o7777,
        }))
    }

    /// Read at most `max_bytes` from the start of a confined file (for showing part of a file too
    /// big to load); returns the bytes read and the file's full size.
    pub fn read_head(
        &self,
        shown: &str,
        resolved: &Path,
        max_bytes: u64,
    ) -> Result<(Vec<u8>, u64), FsError> {
        use std::io::Read;
        let (file, meta) = self
            .open_regular(shown, resolved, Access::Read)?
            .ok_or_else(|| FsError::NotFound {
                path: shown.to_string(),
            })?;
        let mut bytes = Vec::with_capacity(meta.len().min(max_bytes) as usize);
        file.take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| FsError::io("read", shown, e))?;
        Ok((bytes, meta.len()))
    }

    /// Like `read_existing`, but a missing file is an error.
    pub fn read_required(
        &self,
        shown: &str,
        resolved: &Path,
        access: Access,
        max_bytes: u64,
    ) -> Result<Existing, FsError> {
        self.read_existing(shown, resolved, access, max_bytes)?
            .ok_or_else(|| FsError::NotFound {
                path: shown.to_string(),
            })
    }

    /// Replace (or create) `resolved` atomically: a temporary file in the same folder, fsync,
    /// rename. `mode` keeps an existing file's permissions; `None` means a new file (umask
    /// applies). The temporary file's real location is checked before the rename, so a parent
    /// swapped for a symlink is refused. Returns the folders it had to create, outermost first.
    pub fn write_atomic(
        &self,
        shown: &str,
        resolved: &Path,
        bytes: &[u8],
        mode: Option<u32>,
        no_clobber: bool,
    ) -> Result<Vec<PathBuf>, FsError> {
        self.write_atomic_parts(shown, resolved, &[bytes], mode, no_clobber)
    }

    /// `write_atomic` of the concatenation of `parts`, streamed (no joined copy in memory).
    pub fn write_atomic_parts(
        &self,
        shown: &str,
        resolved: &Path,
        parts: &[&[u8]],
        mode: Option<u32>,
        no_clobber: bool,
    ) -> Result<Vec<PathBuf>, FsError> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let parent = resolved.parent().ok_or_else(|| FsError::IsDir {
            path: shown.to_string(),
        })?;
        let created =
            create_dirs(parent).map_err(|e| FsError::io("create folders for", shown, e))?;
        let result = (|| {
            let perms = std::fs::Permissions::from_mode(mode.unwrap_or(NEW_FILE_MODE));
            let tmp = tempfile::Builder::new()
                .prefix(".toolroute-")
                .suffix(".tmp")
                .permissions(perms.clone())
                .tempfile_in(parent)
                .map_err(|e| FsError::io("create a temporary file for", shown, e))?;
            if mode.is_some() {
                // The umask trimmed the mode at creation; an existing file keeps its own bits.
                tmp.as_file()
                    .set_permissions(perms)
                    .map_err(|e| FsError::io("set permissions on", shown, e))?;
            }
            let mut out = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file());
            for part in parts {
                out.write_all(part)
                    .map_err(|e| FsError::io("write", shown, e))?;
            }
            out.flush().map_err(|e| FsError::io("write", shown, e))?;
            drop(out);
            tmp.as_file()
                .sync_all()
                .map_err(|e| FsError::io("fsync", shown, e))?;
            self.verify_open(shown, tmp.as_file(), Access::Write)?;
            let persisted = if no_clobber {
                tmp.persist_noclobber(resolved)
            } else {
                tmp.persist(resolved)
            };
            persisted.map_err(|e| {
                if e.error.kind() == io::ErrorKind::AlreadyExists {
                    FsError::Exists {
                        path: shown.to_string(),
                    }
                } else {
                    FsError::io("replace", shown, e.error)
                }
            })?;
            // Make the rename itself durable; a failure here does not undo the write.
            if let Ok(dir) = File::open(parent) {
                let _ = dir.sync_all();
            }
            Ok(())
        })();
        match result {
            Ok(()) => Ok(created),
            Err(e) => {
                remove_dirs(&created);
                Err(e)
            }
        }
    }

    /// Remove a confined file (never a folder).
    pub fn remove_file(&self, shown: &str, resolved: &Path) -> Result<(), FsError> {
        let meta = std::fs::symlink_metadata(resolved).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => FsError::NotFound {
                path: shown.to_string(),
            },
            _ => FsError::io("delete", shown, e),
        })?;
        if meta.is_dir() {
            return Err(FsError::IsDir {
                path: shown.to_string(),
            });
        }
        std::fs::remove_file(resolved).map_err(|e| FsError::io("delete", shown, e))
    }
}

/// Refuse folders and special files (FIFOs, devices) before opening: opening a FIFO would block.
fn check_regular(shown: &str, resolved: &Path) -> Result<bool, FsError> {
    match std::fs::metadata(resolved) {
        Ok(meta) if meta.is_dir() => Err(FsError::IsDir {
            path: shown.to_string(),
        }),
        Ok(meta) if !meta.is_file() => Err(FsError::io(
            "read",
            shown,
            io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
        )),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(FsError::io("stat", shown, e)),
    }
}

/// `create_dir_all` that reports which folders it created, outermost first.
fn create_dirs(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut missing = Vec::new();
    let mut cur = dir;
    while !cur.exists() {
        missing.push(cur.to_path_buf());
        match cur.parent() {
            Some(p) => cur = p,
            None => break,
        }
    }
    missing.reverse();
    for d in &missing {
        match std::fs::create_dir(d) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => {
                remove_dirs(&missing);
                return Err(e);
            }
        }
    }
    Ok(missing)
}

/// Undo `create_dirs` (innermost first); folders that gained content are left alone.
pub fn remove_dirs(created: &[PathBuf]) {
    for d in created.iter().rev() {
        let _ = std::fs::remove_dir(d);
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
    fn atomic_write_keeps_mode_and_refuses_swapped_parent() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, r, base) = setup();
        let target = base.join("ws/a.txt");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o751)).unwrap();
        let old = r
            .read_required("a.txt", &target, Access::Write, 100)
            .unwrap();
        assert_eq!(old.bytes, b"a");
        r.write_atomic("a.txt", &target, b"new", Some(old.mode), false)
            .unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o751);
        assert!(matches!(
            r.write_atomic("a.txt", &target, b"x", None, true),
            Err(FsError::Exists { .. })
        ));
        // A folder checked as inside, then swapped for a symlink to outside, is caught.
        let checked = r.resolve("swapdir/f.txt", Access::Write).unwrap();
        symlink(&base, base.join("ws/swapdir")).unwrap();
        assert!(matches!(
            r.write_atomic("swapdir/f.txt", &checked, b"x", None, false),
            Err(FsError::Denied(_))
        ));
        assert!(!base.join("f.txt").exists());
        let leftovers = std::fs::read_dir(&base)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".toolroute-")
            })
            .count();
        assert_eq!(leftovers, 0);
    }

    #[test]
    fn atomic_write_creates_and_reports_folders() {
        let (_d, r, base) = setup();
        let target = r.resolve("n1/n2/f.txt", Access::Write).unwrap();
        let created = r
            .write_atomic("n1/n2/f.txt", &target, b"x", None, true)
            .unwrap();
        assert_eq!(created, vec![base.join("ws/n1"), base.join("ws/n1/n2")]);
        std::fs::remove_file(&target).unwrap();
        remove_dirs(&created);
        assert!(!base.join("ws/n1").exists());
    }

    #[test]
    fn read_helpers_refuse_dirs_big_files_and_swaps() {
        let (_d, r, base) = setup();
        assert!(matches!(
            r.read_existing("sub", &base.join("ws/sub"), Access::Read, 10),
            Err(FsError::IsDir { .. })
        ));
        assert!(matches!(
            r.read_existing("a.txt", &base.join("ws/a.txt"), Access::Read, 0),
            Err(FsError::TooLarge { .. })
        ));
        assert!(r
            .read_existing("nope", &base.join("ws/nope"), Access::Read, 10)
            .unwrap()
            .is_none());
        let checked = r.resolve("late", Access::Read).unwrap();
        symlink(base.join("secret"), base.join("ws/late")).unwrap();
        assert!(matches!(
            r.read_existing("late", &checked, Access::Read, 10),
            Err(FsError::Denied(_))
        ));
        assert!(matches!(
            r.remove_file("sub", &base.join("ws/sub")),
            Err(FsError::IsDir { .. })
        ));
        // A FIFO is refused before opening (an open would block forever).
        let fifo = base.join("ws/fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(matches!(
                r.read_existing("fifo", &fifo, Access::Read, 10),
                Err(FsError::Io { .. })
            ));
            assert!(matches!(
                r.read_head("fifo", &fifo, 10),
                Err(FsError::Io { .. })
            ));
        }
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
