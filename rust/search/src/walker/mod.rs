//! The ONE walker grep and glob share, and the only code that reads the tree: directories are
//! listed and files opened relative to directory descriptors opened beneath the confinement root
//! (`openat(O_NOFOLLOW)` per name, `openat2(RESOLVE_BENEATH)` for followed symlinks), so a folder
//! swapped for a symlink mid-walk can never lead outside the root. Ignore files (through the
//! `ignore` crate's matchers, `rules.rs`), hidden entries, globs and file types are decided here
//! in one pass, and what was skipped is counted so the tools can say so.
//!
//! One job per module: `options` is what a walk visits (the caller's options and the filters
//! compiled from them), this module sets a walk up beneath its root and decides on each entry
//! (`Walker::admit`), `engine` is the parallel work queue that lists the tree, and `found` is
//! what the visitors are handed.

mod engine;
mod found;
mod options;

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use rustix::fs::{fstat, FileType, OFlags};

use crate::rules::{absolute, Rules, Verdict};
use crate::{Cancel, SearchError, SkipStats};
use engine::Link;
use found::{mtime, regular_file, At};
pub use found::{Found, PerFile};
pub use options::WalkOptions;
use options::{default_threads, is_hidden, is_vcs_dir, Filters};
use toolroute_files::FsError;
use toolroute_files::{fd_path, lexical_join, open_beneath};
use toolroute_files::{Access, Roots};

/// A walker's start, already resolved beneath its root, and its options: with the root's
/// descriptor, enough to make the same walker in another process.
#[derive(Debug, Clone, Default)]
pub(crate) struct WalkParts {
    /// Canonical start relative to the root.
    pub(crate) start_rel: PathBuf,
    /// How the start is shown (the path as given, relative to the workspace when inside it).
    pub(crate) shown_start: String,
    pub(crate) opts: WalkOptions,
}

/// A confined, validated walk: the start path is open beneath its root and the filters compiled.
pub struct Walker {
    /// The root (workspace or read-only root) the start lies in, and its canonical path.
    root: Arc<OwnedFd>,
    root_path: PathBuf,
    /// Canonical start relative to the root, and absolute (for matching rules).
    start_rel: PathBuf,
    start_abs: PathBuf,
    /// The start, opened beneath the root when the walk was set up.
    start_fd: Mutex<Option<OwnedFd>>,
    start_is_dir: bool,
    /// How the start is shown: the path as given, relative to the workspace when inside it.
    shown_start: String,
    /// The start as the globs see it (`""` when globs are relative to the start).
    glob_prefix: String,
    opts: WalkOptions,
    filters: Filters,
    /// Rules of the start's ancestors (their ignore files and repository boundaries), read on
    /// the first walk: a query the index daemon answers never walks here.
    rules: OnceLock<Rules>,
    /// Told what the walk lists and skips (the search index records it to replay it).
    observer: Option<Arc<dyn Observer>>,
    /// List the start only: admitted folders are reported to the observer, not entered.
    shallow: bool,
    /// Set when the caller gave up: what is still queued is dropped unvisited.
    cancel: Option<Cancel>,
}

/// What a walk decided, for an index that replays it later (`search::index`).
pub(crate) trait Observer: Send + Sync {
    /// A directory about to be listed (root-relative, `fd` open on it): watched before it is
    /// read.
    fn listing(&self, real: &Path, fd: BorrowedFd<'_>);
    /// An entry counted as hidden (else ignored); `rel` is below the start.
    fn skipped(&self, rel: &Path, is_dir: bool, hidden: bool);
    /// A folder admitted but not entered (a shallow walk), root-relative.
    fn subdir(&self, _real: &Path) {}
}

fn bytes_path(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

impl Walker {
    /// Confine `path` (default: the workspace root), open it beneath its root and compile the
    /// filters.
    pub fn new(roots: &Roots, path: Option<&str>, opts: WalkOptions) -> Result<Self, SearchError> {
        let given = path.filter(|p| !p.is_empty());
        let missing =
            || SearchError::Argument(format!("path {:?} does not exist", given.unwrap_or(".")));
        let cannot = |e: &dyn std::fmt::Display| {
            SearchError::Argument(format!("cannot open {:?}: {e}", given.unwrap_or(".")))
        };
        // Opened once, by descriptor, beneath the root it lies under; the walk stays beneath it.
        let flags = OFlags::RDONLY | OFlags::NONBLOCK;
        let (start_fd, root) = match given {
            None => {
                let ws = roots.workspace_root();
                (
                    ws.open_at(Path::new(""), flags)
                        .map_err(|e| cannot(&io::Error::from(e)))?,
                    ws,
                )
            }
            Some(p) => roots
                .open_in_root(p, Access::Read, flags)
                .map_err(|e| match e {
                    FsError::Denied(c) => SearchError::Confine(c),
                    FsError::NotFound { .. } => missing(),
                    other => cannot(&other),
                })?,
        };
        // Where it really is (the kernel's record of the descriptor), relative to that root.
        let root_path = root.path();
        let start_rel = fd_path(start_fd.as_fd())
            .map_err(|e| cannot(&e))?
            .strip_prefix(root_path)
            .map_err(|_| missing())?
            .to_path_buf();
        let root = root.fd().try_clone_to_owned().map_err(|e| cannot(&e))?;
        let shown_start = match given {
            None => String::new(),
            Some(p) => {
                let full = lexical_join(roots.workspace(), Path::new(p));
                match full.strip_prefix(roots.workspace()) {
                    Ok(rel) => rel.to_string_lossy().into_owned(),
                    Err(_) => full.to_string_lossy().into_owned(),
                }
            }
        };
        Self::assemble(
            root,
            root_path.to_path_buf(),
            start_fd,
            WalkParts {
                start_rel,
                shown_start,
                opts,
            },
        )
    }

    /// What another process needs, beside the root's descriptor, to make this walker again
    /// (the index daemon, `search::index::daemon`): the start is resolved already.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // the daemon is Linux's
    pub(crate) fn parts(&self) -> WalkParts {
        WalkParts {
            start_rel: self.start_rel.clone(),
            shown_start: self.shown_start.clone(),
            opts: self.opts.clone(),
        }
    }

    /// The walker `parts` describe, beneath `root` (whose canonical path is `root_path`): the
    /// start is opened again beneath the root by descriptor, never by path.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn from_parts(
        root: OwnedFd,
        root_path: PathBuf,
        parts: WalkParts,
    ) -> Result<Self, SearchError> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW;
        let start_fd = open_beneath(root.as_fd(), &parts.start_rel, flags)
            .map_err(|e| SearchError::Argument(format!("cannot open the start: {e}")))?;
        Self::assemble(root, root_path, start_fd, parts)
    }

    fn assemble(
        root: OwnedFd,
        root_path: PathBuf,
        start_fd: OwnedFd,
        parts: WalkParts,
    ) -> Result<Self, SearchError> {
        let WalkParts {
            start_rel,
            shown_start,
            opts,
        } = parts;
        let start_type = FileType::from_raw_mode(
            fstat(&start_fd)
                .map_err(|e| SearchError::Argument(e.to_string()))?
                .st_mode,
        );
        let glob_prefix = if opts.globs_from_workspace {
            shown_start.clone()
        } else {
            String::new()
        };
        let filters = Filters::compile(&opts)?;
        let start_abs = absolute(&root_path, &start_rel);
        Ok(Self {
            root: Arc::new(root),
            root_path,
            start_rel,
            start_abs,
            start_fd: Mutex::new(Some(start_fd)),
            start_is_dir: start_type == FileType::Directory,
            shown_start,
            glob_prefix,
            opts,
            filters,
            rules: OnceLock::new(),
            observer: None,
            shallow: false,
            cancel: None,
        })
    }

    fn rules(&self) -> &Rules {
        self.rules.get_or_init(|| {
            if self.opts.no_ignore {
                Rules::empty()
            } else {
                Rules::new(self.opts.require_git).with_parents(&self.start_abs)
            }
        })
    }

    /// Whether the walk follows symbolic links.
    pub fn follows_symlinks(&self) -> bool {
        self.opts.follow_symlinks
    }

    /// The root the walk is confined to, for `reopen`.
    pub fn root(&self) -> Arc<OwnedFd> {
        Arc::clone(&self.root)
    }

    /// The root's path (for messages).
    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// How a path below the start is shown: the start as given, then the names walked.
    pub(crate) fn shown(&self, rel: &Path) -> String {
        join_shown(&self.shown_start, rel)
    }

    /// Stop walking (dropping what is queued, unvisited) once `cancel` is set.
    pub fn cancelled_by(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(Cancel::is_cancelled)
    }

    pub(crate) fn observe(&mut self, observer: Arc<dyn Observer>) {
        self.observer = Some(observer);
    }

    /// List the start folder only (an index re-listing one folder's entries).
    pub(crate) fn shallow(&mut self) {
        self.shallow = true;
    }

    pub(crate) fn options(&self) -> &WalkOptions {
        &self.opts
    }

    /// The start relative to the root, and whether it is a directory.
    pub(crate) fn start(&self) -> (&Path, bool) {
        (&self.start_rel, self.start_is_dir)
    }

    /// Whether the caller's globs and types leave out `rel` (below the start).
    pub(crate) fn rejected(&self, rel: &Path, is_dir: bool) -> bool {
        !self.filters.is_empty() && {
            let shown;
            let glob_path = if self.glob_prefix.is_empty() {
                rel
            } else {
                shown = join_shown(&self.glob_prefix, rel);
                Path::new(&shown)
            };
            self.filters.rejects(glob_path, is_dir)
        }
    }

    /// Whether any glob or type filter applies.
    pub(crate) fn filtered(&self) -> bool {
        !self.filters.is_empty()
    }

    /// Whether a `!` glob could leave out a directory (else only files need checking).
    pub(crate) fn rejects_dirs(&self) -> bool {
        self.filters.excludes
    }

    /// Worker threads: as asked, but never more than the default (the CPUs, at most 12): more
    /// do not scan faster, and a count sent from elsewhere (an index daemon's client) must not
    /// spawn threads without end.
    pub(crate) fn threads(&self) -> usize {
        let most = default_threads();
        if self.opts.threads == 0 {
            most
        } else {
            self.opts.threads.min(most)
        }
    }

    /// Walk; `make` builds one visitor per thread, called for every file. Returns what was
    /// skipped. May be called once (the start descriptor is consumed).
    pub fn walk<F, V>(&self, per_file: PerFile, make: F) -> SkipStats
    where
        F: Fn() -> V + Sync,
        V: FnMut(&Found<'_>, &mut SkipStats) + Send,
    {
        let mut stats = SkipStats::default();
        let Some(start) = self
            .start_fd
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return stats;
        };
        if !self.start_is_dir {
            // A file named as the path is searched whatever the rules and filters say.
            let found = Found {
                walker: self,
                rel: Path::new(""),
                real: &self.start_rel,
                at: At::Open(&start),
            };
            (make())(&found, &mut stats);
            return stats;
        }
        engine::walk(self, start, per_file, &make)
    }

    /// Open a file found by an earlier walk again, by its root-relative path, beneath the root.
    pub fn reopen(root: &OwnedFd, rel: &Path, follow: bool) -> io::Result<File> {
        let mut flags = OFlags::RDONLY | OFlags::NONBLOCK;
        if !follow {
            flags |= OFlags::NOFOLLOW;
        }
        regular_file(open_beneath(root.as_fd(), rel, flags)?)
    }

    /// Modification time of a file found by an earlier walk, by its root-relative path, looked
    /// up beneath the root without following any symlink.
    pub fn modified_beneath(root: &OwnedFd, rel: &Path) -> Option<SystemTime> {
        let fd = open_beneath(
            root.as_fd(),
            rel,
            toolroute_files::handle_flags() | OFlags::NOFOLLOW,
        )
        .ok()?;
        mtime(&fstat(&fd).ok()?)
    }

    /// Open what a symlink leads to, beneath the root. A relative target is resolved from the
    /// link's real folder; an absolute one is taken relative to the root when it points inside
    /// it (a link made with the workspace's absolute path), and refused (`EXDEV`) otherwise.
    fn resolve_link(&self, link: &Link<'_>) -> io::Result<OwnedFd> {
        let dir = link.dir.fd()?;
        let target = rustix::fs::readlinkat(dir, link.name, Vec::new())?;
        let target = bytes_path(target.as_bytes());
        let rel = if target.is_absolute() {
            target
                .strip_prefix(&self.root_path)
                .map_err(|_| io::Error::from_raw_os_error(libc::EXDEV))?
                .to_path_buf()
        } else {
            link.real_dir.join(target)
        };
        open_beneath(self.root.as_fd(), &rel, OFlags::RDONLY | OFlags::NONBLOCK)
    }

    /// Where an open file really is, relative to the root (the kernel's record of it).
    fn real_path(&self, fd: &OwnedFd) -> Option<PathBuf> {
        let path = fd_path(fd.as_fd()).ok()?;
        path.strip_prefix(&self.root_path)
            .ok()
            .map(Path::to_path_buf)
    }

    /// The rules' and filters' decision on one entry; counts hidden and ignored ones.
    fn admit(
        &self,
        rules: &Rules,
        rel: &Path,
        name: &[u8],
        is_dir: bool,
        stats: &mut SkipStats,
    ) -> bool {
        if is_dir && is_vcs_dir(name) {
            return false;
        }
        let verdict = if rules.is_empty() {
            Verdict::None
        } else {
            rules.matched(&absolute(&self.start_abs, rel), is_dir)
        };
        let rejected = self.rejected(rel, is_dir);
        // Hidden first (as counted before): a hidden entry is only worth a notice when the
        // caller's filters would have kept it. A `!` rule reveals it, as in ripgrep.
        if !self.opts.hidden && is_hidden(name) && verdict != Verdict::Whitelist {
            if !rejected {
                stats.hidden += 1;
            }
            if let Some(o) = &self.observer {
                o.skipped(rel, is_dir, true);
            }
            return false;
        }
        if verdict == Verdict::Ignore {
            stats.ignored += 1;
            if let Some(o) = &self.observer {
                o.skipped(rel, is_dir, false);
            }
            return false;
        }
        !rejected
    }
}

fn join_shown(prefix: &str, rel: &Path) -> String {
    let rel = rel.to_string_lossy();
    match (prefix.is_empty(), rel.is_empty()) {
        (true, _) => rel.into_owned(),
        (false, true) => prefix.to_string(),
        (false, false) if prefix.ends_with('/') => format!("{prefix}{rel}"),
        (false, false) => format!("{prefix}/{rel}"),
    }
}
