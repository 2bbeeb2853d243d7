//! The parallel walk: a depth-first work queue the calling thread starts alone, adding worker
//! threads only once the tree turns out to be big enough to pay for them (`SPAWN_AFTER`): a
//! tiny tree never starts a thread. Directories are listed by descriptor, symlinks followed
//! beneath the root, loops detected; what to keep is asked of the walker (`Walker::admit`).

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rustix::fs::{fstat, openat, statat, AtFlags, Dir, FileType, Mode, OFlags, Stat};

use super::found::{At, Found, PerFile};
use super::options::is_hidden;
use super::{bytes_path, Walker};
use crate::rules::{absolute, Present, Rules};
use crate::SkipStats;

/// Worker threads are added once the calling thread has walked this long with this much work
/// still queued. A 100-file tree is done well before it: starting threads and handing them
/// files one by one would cost more than the whole walk (measured: 3x slower on a busy machine).
const SPAWN_AFTER: Duration = Duration::from_millis(2);
const SPAWN_QUEUED: usize = 8;

/// Walk the directory `start` (open, the walker's start) with `threads` threads at most; `make`
/// builds one visitor per thread. Returns what was skipped.
pub(super) fn walk<F, V>(walker: &Walker, start: OwnedFd, per_file: PerFile, make: &F) -> SkipStats
where
    F: Fn() -> V + Sync,
    V: FnMut(&Found<'_>, &mut SkipStats) + Send,
{
    let engine = Engine {
        walker,
        per_file,
        queue: Mutex::new(Vec::new()),
        ready: Condvar::new(),
        pending: AtomicUsize::new(0),
        idle: AtomicUsize::new(0),
        total: Mutex::new(SkipStats::default()),
    };
    let chain = walker.opts.follow_symlinks.then(|| Chain::root(&start));
    engine.push(Item::Dir {
        at: DirAt::Open(start),
        rel: PathBuf::new(),
        real: walker.start_rel.clone(),
        rules: walker.rules().clone(),
        chain,
    });
    engine.run(walker.threads(), make);
    engine.total.into_inner().unwrap_or_else(|e| e.into_inner())
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
pub(super) struct Link<'a> {
    pub(super) dir: &'a Dir,
    pub(super) name: &'a CStr,
    rel: &'a Path,
    pub(super) real_dir: &'a Path,
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
