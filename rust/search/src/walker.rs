//! The ONE walker grep and glob share, and the only code that reads the tree: directories are
//! listed and files opened relative to directory descriptors opened beneath the confinement root
//! (`openat(O_NOFOLLOW)` per name, `openat2(RESOLVE_BENEATH)` for followed symlinks), so a folder
//! swapped for a symlink mid-walk can never lead outside the root. Ignore files (through the
//! `ignore` crate's matchers, `rules.rs`), hidden entries, globs and file types are decided here
//! in one pass, and what was skipped is counted so the tools can say so.
//!
//! The walk starts on the calling thread and adds worker threads only once the tree turns out to
//! be big enough to pay for them (see `SPAWN_AFTER`): a tiny tree never starts a thread.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};
use rustix::fs::{fstat, openat, statat, AtFlags, Dir, FileType, Mode, OFlags, Stat};

use super::rules::{absolute, Present, Rules, Verdict};
use super::{Cancel, SearchError, SkipStats};
use toolroute_files::read_flags;
use toolroute_files::FsError;
use toolroute_files::{fd_path, lexical_join, open_beneath};
use toolroute_files::{Access, Roots};

/// Version-control metadata directories: never searched, even with `hidden`.
const VCS_DIRS: [&str; 6] = [".git", ".hg", ".svn", ".bzr", ".jj", ".sl"];

/// Worker threads are added once the calling thread has walked this long with this much work
/// still queued. A 100-file tree is done well before it: starting threads and handing them
/// files one by one would cost more than the whole walk (measured: 3x slower on a busy machine).
const SPAWN_AFTER: Duration = Duration::from_millis(2);
const SPAWN_QUEUED: usize = 8;

/// What a walk visits: the ignore rules, globs and types, links and depth.
#[derive(Debug, Clone, Default)]
pub struct WalkOptions {
    /// Include hidden (dot) files and directories.
    pub hidden: bool,
    /// Ignore .gitignore, .ignore, .git/info/exclude and git's global excludes.
    pub no_ignore: bool,
    /// Apply .gitignore only inside a git repository (ripgrep's default). toolroute's tools pass
    /// `false`: a .gitignore is honoured wherever it is, see docs/search.md.
    pub require_git: bool,
    /// rg-style globs; `!glob` excludes. Matched relative to the start path, or to the workspace
    /// root with `globs_from_workspace` (rg's `-g` run from the workspace root).
    pub globs: Vec<String>,
    /// Match the globs relative to the workspace root instead of the start path.
    pub globs_from_workspace: bool,
    /// ripgrep file type names (`py`, `rust`...); `!name` excludes the type. A file a glob
    /// selects is kept whatever its type (as in ripgrep).
    pub types: Vec<String>,
    /// Follow symlinks; each is resolved beneath the root it was found in.
    pub follow_symlinks: bool,
    /// Most worker threads; 0 picks the number of CPUs (at most 12, like ripgrep).
    pub threads: usize,
}

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

/// The caller's glob and type filters, applied after the ignore rules.
#[derive(Clone)]
pub(super) struct Filters {
    globs: Override,
    types: Types,
    /// Some glob is a `!` exclusion: only those can reject a directory (types never do).
    excludes: bool,
}

impl Filters {
    fn new(globs: Override, types: Types) -> Self {
        let excludes = globs.num_ignores() > 0;
        Self {
            globs,
            types,
            excludes,
        }
    }

    /// ripgrep's order: a glob that matches decides (an excluding one rejects, a selecting one
    /// keeps the file whatever its type); otherwise the type filter decides.
    pub(super) fn rejects(&self, path: &Path, is_dir: bool) -> bool {
        if is_dir && !self.excludes {
            return false;
        }
        let by_glob = self.globs.matched(path, is_dir);
        if by_glob.is_ignore() {
            return true;
        }
        !by_glob.is_whitelist() && self.types.matched(path, is_dir).is_ignore()
    }

    fn is_empty(&self) -> bool {
        self.globs.is_empty() && self.types.is_empty()
    }
}

fn is_vcs_dir(name: &[u8]) -> bool {
    VCS_DIRS.iter().any(|v| name == v.as_bytes())
}

fn is_hidden(name: &[u8]) -> bool {
    name.first() == Some(&b'.')
}

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
    walker: &'a Walker,
    rel: &'a Path,
    /// Where the file really is, relative to the root (no symlink on the way).
    real: &'a Path,
    at: At<'a>,
}

enum At<'a> {
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

fn mtime(st: &Stat) -> Option<SystemTime> {
    let secs = u64::try_from(st.st_mtime).ok()?;
    let nanos = u32::try_from(st.st_mtime_nsec).unwrap_or(0);
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

/// Keep `fd` only if it is a regular file.
fn regular_file(fd: OwnedFd) -> io::Result<File> {
    let st = fstat(&fd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(File::from(fd))
}

/// Normalise `path` lexically (`.` dropped, `..` pops): how a path given by the caller is shown.
fn build_filter(globs: &[String]) -> Result<Override, SearchError> {
    // Matched against relative paths (see `Walker::admit`), so the root is empty.
    let mut builder = OverrideBuilder::new("");
    for glob in globs {
        builder.add(glob).map_err(|e| SearchError::Glob {
            glob: glob.clone(),
            reason: e.to_string(),
        })?;
    }
    builder.build().map_err(|e| SearchError::Glob {
        glob: globs.join(" "),
        reason: e.to_string(),
    })
}

fn build_types(names: &[String]) -> Result<Types, SearchError> {
    if names.is_empty() {
        // Building the ~150 default definitions costs more than a small walk.
        return Ok(Types::empty());
    }
    let mut builder = TypesBuilder::new();
    builder.add_defaults();
    for name in names {
        match name.strip_prefix('!') {
            Some(negated) => builder.negate(negated),
            None => builder.select(name),
        };
    }
    builder.build().map_err(|e| {
        let known: Vec<String> = TypesBuilder::new()
            .add_defaults()
            .definitions()
            .iter()
            .map(|d| d.name().to_string())
            .collect();
        let hint = names
            .iter()
            .filter_map(|n| {
                let n = n.trim_start_matches('!');
                known
                    .iter()
                    .filter(|k| strsim::jaro_winkler(k, n) > 0.85)
                    .max_by(|a, b| {
                        strsim::jaro_winkler(a, n).total_cmp(&strsim::jaro_winkler(b, n))
                    })
                    .cloned()
            })
            .collect::<Vec<_>>();
        let mut message = format!(
            "{e} (file types are ripgrep's names, e.g. py, rust, js, ts, go, java, c, cpp, md)"
        );
        if !hint.is_empty() {
            message.push_str(&format!("; did you mean {}?", hint.join(", ")));
        }
        SearchError::Type(message)
    })
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(12))
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
        let filter = build_filter(&opts.globs)?;
        let types = build_types(&opts.types)?;
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
            filters: Filters::new(filter, types),
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
        let engine = Engine {
            walker: self,
            per_file,
            queue: Mutex::new(Vec::new()),
            ready: Condvar::new(),
            pending: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            total: Mutex::new(SkipStats::default()),
        };
        let chain = self.opts.follow_symlinks.then(|| Chain::root(&start));
        engine.push(Item::Dir {
            at: DirAt::Open(start),
            rel: PathBuf::new(),
            real: self.start_rel.clone(),
            rules: self.rules().clone(),
            chain,
        });
        engine.run(self.threads(), &make);
        engine.total.into_inner().unwrap_or_else(|e| e.into_inner())
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

/// Directories on the way down, by device and inode: a followed link that leads back to one of
/// them is a loop.
struct Chain {
    id: (u64, u64),
    parent: Option<Arc<Chain>>,
}

impl Chain {
    fn id(st: &Stat) -> (u64, u64) {
        toolroute_files::file_id(st)
    }

    fn root(fd: &OwnedFd) -> Arc<Chain> {
        let id = fstat(fd).map(|st| Self::id(&st)).unwrap_or((0, 0));
        Arc::new(Chain { id, parent: None })
    }

    fn contains(self: &Arc<Self>, id: (u64, u64)) -> bool {
        std::iter::successors(Some(self.as_ref()), |c| c.parent.as_deref()).any(|c| c.id == id)
    }
}

/// A symlink met in a listing.
struct Link<'a> {
    dir: &'a Dir,
    name: &'a CStr,
    rel: &'a Path,
    real_dir: &'a Path,
}

/// Where a queued directory is: a name in an open parent (opened when its turn comes, so only
/// directories being listed or with queued children hold a descriptor), or already open.
enum DirAt {
    Child(Arc<Dir>, CString),
    Open(OwnedFd),
}

/// Queued work. `rel` is the path as walked (below the start), `real` where it really is
/// (relative to the root, no symlink on the way; for a link, its folder's).
enum Item {
    Dir {
        at: DirAt,
        rel: PathBuf,
        real: PathBuf,
        rules: Rules,
        chain: Option<Arc<Chain>>,
    },
    File {
        dir: Arc<Dir>,
        name: CString,
        rel: PathBuf,
        real: PathBuf,
    },
    /// A symlink to follow: resolved beneath the root, then decided on like any entry.
    Link {
        dir: Arc<Dir>,
        name: CString,
        rel: PathBuf,
        real_dir: PathBuf,
        rules: Rules,
        chain: Option<Arc<Chain>>,
    },
}

struct Engine<'w> {
    walker: &'w Walker,
    per_file: PerFile,
    queue: Mutex<Vec<Item>>,
    ready: Condvar,
    /// Items queued or being processed; the walk is over when it reaches zero.
    pending: AtomicUsize,
    /// Threads waiting for work: waking nobody costs a system call per item otherwise.
    idle: AtomicUsize,
    total: Mutex<SkipStats>,
}

impl Engine<'_> {
    fn push(&self, item: Item) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.pending.fetch_add(1, Ordering::AcqRel);
        queue.push(item);
        if self.idle.load(Ordering::Acquire) > 0 {
            self.ready.notify_one();
        }
    }

    fn next(&self) -> Option<Item> {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            // Depth first (a stack): few directories are open at once.
            if let Some(item) = queue.pop() {
                return Some(item);
            }
            if self.pending.load(Ordering::Acquire) == 0 {
                return None;
            }
            self.idle.fetch_add(1, Ordering::AcqRel);
            queue = self.ready.wait(queue).unwrap_or_else(|e| e.into_inner());
            self.idle.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn finish_one(&self) {
        let _queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 && self.idle.load(Ordering::Acquire) > 0
        {
            self.ready.notify_all();
        }
    }

    fn queued(&self) -> usize {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Work on the calling thread; add helpers once the tree proves big enough.
    fn run<F, V>(&self, threads: usize, make: &F)
    where
        F: Fn() -> V + Sync,
        V: FnMut(&Found<'_>, &mut SkipStats) + Send,
    {
        std::thread::scope(|scope| {
            let mut visit = make();
            let mut stats = SkipStats::default();
            let began = Instant::now();
            let mut spawned = threads <= 1;
            while let Some(item) = self.next() {
                self.process(item, &mut visit, &mut stats);
                self.finish_one();
                if !spawned && began.elapsed() >= SPAWN_AFTER && self.queued() >= SPAWN_QUEUED {
                    spawned = true;
                    for _ in 1..threads {
                        scope.spawn(|| self.work(make()));
                    }
                }
            }
            drop(visit);
            self.merge(&stats);
        });
    }

    fn work<V>(&self, mut visit: V)
    where
        V: FnMut(&Found<'_>, &mut SkipStats),
    {
        let mut stats = SkipStats::default();
        while let Some(item) = self.next() {
            self.process(item, &mut visit, &mut stats);
            self.finish_one();
        }
        // Drop the visitor (it flushes its results) before the walk returns.
        drop(visit);
        self.merge(&stats);
    }

    fn merge(&self, stats: &SkipStats) {
        self.total
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .merge(stats);
    }

    fn error(&self, stats: &mut SkipStats, rel: &Path, err: impl std::fmt::Display) {
        stats.errors += 1;
        if stats.first_errors.len() < 5 {
            let shown = self.walker.shown(rel);
            stats.first_errors.push(format!("{shown}: {err}"));
        }
    }

    fn process<V>(&self, item: Item, visit: &mut V, stats: &mut SkipStats)
    where
        V: FnMut(&Found<'_>, &mut SkipStats),
    {
        if self.walker.cancelled() {
            return; // dropped: the queue empties without opening anything more
        }
        match item {
            Item::File {
                dir,
                name,
                rel,
                real,
            } => {
                let dir_fd = dir.fd().ok();
                if let Some(fd) = dir_fd {
                    let found = Found {
                        walker: self.walker,
                        rel: &rel,
                        real: &real,
                        at: At::Name(fd, &name),
                    };
                    visit(&found, stats);
                }
            }
            Item::Dir {
                at,
                rel,
                real,
                rules,
                chain,
            } => {
                let fd = match at {
                    DirAt::Open(fd) => fd,
                    DirAt::Child(parent, name) => {
                        let flags = OFlags::RDONLY
                            | OFlags::DIRECTORY
                            | OFlags::NOFOLLOW
                            | OFlags::NONBLOCK
                            | OFlags::CLOEXEC;
                        match parent
                            .fd()
                            .and_then(|p| openat(p, &name, flags, Mode::empty()))
                        {
                            Ok(fd) => fd,
                            // Vanished, unreadable, or swapped for a symlink since the listing.
                            Err(e) => return self.error(stats, &rel, e),
                        }
                    }
                };
                self.list(fd, &rel, &real, &rules, chain, visit, stats);
            }
            Item::Link {
                dir,
                name,
                rel,
                real_dir,
                rules,
                chain,
            } => {
                let link = Link {
                    dir: &dir,
                    name: &name,
                    rel: &rel,
                    real_dir: &real_dir,
                };
                self.follow(link, &rules, chain, visit, stats)
            }
        }
    }

    /// Resolve a symlink beneath the root; a target outside it is counted, never opened.
    fn follow<V>(
        &self,
        link: Link<'_>,
        rules: &Rules,
        chain: Option<Arc<Chain>>,
        visit: &mut V,
        stats: &mut SkipStats,
    ) where
        V: FnMut(&Found<'_>, &mut SkipStats),
    {
        let w = self.walker;
        let rel = link.rel;
        let fd = match w.resolve_link(&link) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                stats.outside_roots += 1;
                return;
            }
            Err(e) => return self.error(stats, rel, e),
        };
        let Ok(st) = fstat(&fd) else {
            return;
        };
        let kind = FileType::from_raw_mode(st.st_mode);
        let is_dir = kind == FileType::Directory;
        if !w.admit(rules, rel, link.name.to_bytes(), is_dir, stats) {
            return;
        }
        let Some(real) = w.real_path(&fd) else {
            return self.error(stats, rel, "cannot tell where the link leads");
        };
        if is_dir {
            if chain.as_ref().is_some_and(|c| c.contains(Chain::id(&st))) {
                return self.error(stats, rel, "symlink loop");
            }
            self.list(fd, rel, &real, rules, chain, visit, stats);
        } else if kind == FileType::RegularFile {
            let found = Found {
                walker: w,
                rel,
                real: &real,
                at: At::Open(&fd),
            };
            visit(&found, stats);
        }
    }

    /// List one directory and queue (or visit) what the rules and filters let through.
    #[allow(clippy::too_many_arguments)]
    fn list<V>(
        &self,
        fd: OwnedFd,
        rel: &Path,
        real: &Path,
        rules: &Rules,
        chain: Option<Arc<Chain>>,
        visit: &mut V,
        stats: &mut SkipStats,
    ) where
        V: FnMut(&Found<'_>, &mut SkipStats),
    {
        let w = self.walker;
        let chain = match chain {
            Some(parent) => {
                let id = fstat(&fd).map(|st| Chain::id(&st)).unwrap_or((0, 0));
                Some(Arc::new(Chain {
                    id,
                    parent: Some(parent),
                }))
            }
            None => None,
        };
        if let Some(o) = &w.observer {
            o.listing(real, fd.as_fd());
        }
        let mut dir = match Dir::new(fd) {
            Ok(dir) => dir,
            Err(e) => return self.error(stats, rel, e),
        };
        let mut entries: Vec<(CString, FileType)> = Vec::new();
        let mut present = Present::default();
        while let Some(entry) = dir.read() {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    self.error(stats, rel, e);
                    break;
                }
            };
            let name = entry.file_name();
            let bytes = name.to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            let mut kind = entry.file_type();
            if kind == FileType::Unknown {
                let Ok(dir_fd) = dir.fd() else { continue };
                match statat(dir_fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => kind = FileType::from_raw_mode(st.st_mode),
                    Err(_) => continue,
                }
            }
            if !w.opts.no_ignore {
                present.note(bytes, kind);
            }
            entries.push((name.to_owned(), kind));
        }
        let rules = match dir.fd() {
            Ok(dir_fd) if !w.opts.no_ignore => {
                rules.child(dir_fd, &absolute(&w.start_abs, rel), present)
            }
            _ => rules.clone(),
        };
        let dir = Arc::new(dir);
        let Ok(dir_fd) = dir.fd() else { return };
        for (name, kind) in entries {
            let child = rel.join(bytes_path(name.as_bytes()));
            if kind == FileType::Symlink {
                if w.opts.follow_symlinks {
                    self.push(Item::Link {
                        dir: Arc::clone(&dir),
                        rel: child,
                        real_dir: real.to_path_buf(),
                        name,
                        rules: rules.clone(),
                        chain: chain.clone(),
                    });
                } else if !w.opts.hidden && is_hidden(name.as_bytes()) {
                    // Not followed and not listed (as ripgrep); a hidden one is still counted.
                    w.admit(&rules, &child, name.as_bytes(), false, stats);
                }
                continue;
            }
            let is_dir = kind == FileType::Directory;
            if !w.admit(&rules, &child, name.as_bytes(), is_dir, stats) {
                continue;
            }
            if is_dir && w.shallow {
                if let Some(o) = &w.observer {
                    o.subdir(&real.join(bytes_path(name.as_bytes())));
                }
            } else if is_dir {
                let real = real.join(bytes_path(name.as_bytes()));
                self.push(Item::Dir {
                    at: DirAt::Child(Arc::clone(&dir), name),
                    rel: child,
                    real,
                    rules: rules.clone(),
                    chain: chain.clone(),
                });
            } else if kind != FileType::RegularFile {
                // FIFOs, sockets and devices are never listed or opened.
            } else if self.per_file == PerFile::Cheap {
                let real = real.join(bytes_path(name.as_bytes()));
                let found = Found {
                    walker: w,
                    rel: &child,
                    real: &real,
                    at: At::Name(dir_fd, &name),
                };
                visit(&found, stats);
            } else {
                let real = real.join(bytes_path(name.as_bytes()));
                self.push(Item::File {
                    dir: Arc::clone(&dir),
                    name,
                    rel: child,
                    real,
                });
            }
        }
    }
}
