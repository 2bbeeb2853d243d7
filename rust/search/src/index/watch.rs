//! Freshness: an inotify watch on every indexed directory, read in order by one thread, plus a
//! barrier. inotify is used directly (the backend the `notify` crate wraps) because `notify`
//! asks for open and close-without-write events too, and every file a search reads would then
//! queue two events (a 47k-file build overflows the kernel's 16k-event queue).
//!
//! The barrier: one inotify descriptor delivers events in order, so after a sentinel file in a
//! private folder (outside the workspace, watched by the same descriptor) is seen created,
//! every change made before it is known. Each barrier's sentinel has a random 128-bit name that
//! only it waits for: a file another process makes in that folder (even after watching it)
//! cannot end a barrier early, since no later barrier ever waits for a name seen before.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use rustc_hash::FxHashMap;

pub(crate) use super::mark::Mark;
use crate::rules::is_rule_name;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Tree,
    /// A `.git` folder: `info` appearing or going changes the exclude rules.
    Git,
    /// `.git/info`: `exclude` changing changes the rules.
    GitInfo,
    Sentinel,
}

/// How long a query waits for its barrier before giving the index up.
const BARRIER_WAIT: Duration = Duration::from_millis(200);

struct Shared {
    watches: Mutex<Watches>,
    paths: Mutex<FxHashMap<WatchDescriptor, (PathBuf, Role)>>,
    /// The sentinel names barriers wait for, and whether each has been seen.
    awaited: Mutex<FxHashMap<u128, bool>>,
    arrived: Condvar,
    stop: AtomicBool,
}

pub(crate) struct Watch {
    shared: Arc<Shared>,
    root: PathBuf,
    sentinel: tempfile::TempDir,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A private folder for the sentinel, never inside `root`.
fn sentinel_dir(root: &Path) -> std::io::Result<tempfile::TempDir> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    let bases = cache
        .map(|c| c.join("toolroute"))
        .into_iter()
        .chain([std::env::temp_dir()]);
    for base in bases {
        if base.starts_with(root) || std::fs::create_dir_all(&base).is_err() {
            continue;
        }
        let base = base.canonicalize()?;
        if !base.starts_with(root) {
            return tempfile::Builder::new().prefix("barrier-").tempdir_in(base);
        }
    }
    Err(std::io::Error::other(
        "no folder outside the workspace for the barrier",
    ))
}

const TREE_MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MODIFY)
    .union(WatchMask::CLOSE_WRITE)
    .union(WatchMask::ATTRIB)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF)
    .union(WatchMask::ONLYDIR)
    .union(WatchMask::DONT_FOLLOW);

impl Watch {
    /// Start watching (nothing yet but the sentinel); `sink` receives marks in event order.
    pub(crate) fn start(root: &Path, sink: Box<dyn Fn(Mark) + Send>) -> std::io::Result<Self> {
        let sentinel = sentinel_dir(root)?;
        let inotify = Inotify::init()?;
        let mut watches = inotify.watches();
        let wd = watches.add(sentinel.path(), WatchMask::CREATE | WatchMask::ONLYDIR)?;
        let mut paths = FxHashMap::default();
        paths.insert(wd, (PathBuf::new(), Role::Sentinel));
        let shared = Arc::new(Shared {
            watches: Mutex::new(watches),
            paths: Mutex::new(paths),
            awaited: Mutex::new(FxHashMap::default()),
            arrived: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("toolroute-index-watch".into())
            .spawn(move || read_loop(inotify, &thread_shared, &*sink))?;
        Ok(Self {
            shared,
            root: root.to_path_buf(),
            sentinel,
            thread: Some(thread),
        })
    }

    /// Watch a directory (root-relative) before it is listed, and its `.git` rule folders.
    pub(crate) fn add(&self, dir: &Path) -> std::io::Result<()> {
        let abs = self.root.join(dir);
        let mut watches = lock(&self.shared.watches);
        let wd = watches.add(&abs, TREE_MASK)?;
        let mut added = vec![(wd, dir.to_path_buf(), Role::Tree)];
        let git_mask = WatchMask::CREATE
            | WatchMask::DELETE
            | WatchMask::MODIFY
            | WatchMask::MOVED_FROM
            | WatchMask::MOVED_TO
            | WatchMask::ONLYDIR
            | WatchMask::DONT_FOLLOW;
        // Missing (no repository here) is the common case and is fine.
        if let Ok(wd) = watches.add(abs.join(".git"), git_mask) {
            added.push((wd, dir.to_path_buf(), Role::Git));
            if let Ok(wd) = watches.add(abs.join(".git/info"), git_mask) {
                added.push((wd, dir.to_path_buf(), Role::GitInfo));
            }
        }
        drop(watches);
        let mut paths = lock(&self.shared.paths);
        for (wd, path, role) in added {
            paths.insert(wd, (path, role));
        }
        Ok(())
    }

    /// Wait until every change made before this call has been delivered.
    pub(crate) fn barrier(&self) -> bool {
        let Ok(nonce) = random_nonce() else {
            return false;
        };
        lock(&self.shared.awaited).insert(nonce, false);
        let file = self.sentinel.path().join(format!("b{nonce:032x}"));
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file)
            .is_ok();
        let _ = std::fs::remove_file(&file);
        let awaited = lock(&self.shared.awaited);
        let (mut awaited, _) = self
            .shared
            .arrived
            .wait_timeout_while(awaited, BARRIER_WAIT, |a| {
                made && a.get(&nonce) == Some(&false)
            })
            .unwrap_or_else(|e| e.into_inner());
        made && awaited.remove(&nonce) == Some(true)
    }

    pub(crate) fn watched(&self) -> usize {
        lock(&self.shared.paths).len()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// 128 bits from the kernel's generator: a sentinel name nobody else can guess.
fn random_nonce() -> std::io::Result<u128> {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(u128::from_ne_bytes(bytes))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes read from the watch at a time: dozens of events (one is at most 272 bytes), and a
/// thread per live index holds it, so not more.
const EVENT_BUFFER: usize = 8 * 1024;

fn read_loop(mut inotify: Inotify, shared: &Shared, sink: &dyn Fn(Mark)) {
    let mut buf = vec![0u8; EVENT_BUFFER];
    while !shared.stop.load(Ordering::Relaxed) {
        let mut fds = [rustix::event::PollFd::new(
            &inotify,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        if rustix::event::poll(&mut fds, Some(&timeout)).unwrap_or(0) == 0 {
            continue;
        }
        let events = match inotify.read_events(&mut buf) {
            Ok(events) => events,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => {
                sink(Mark::Lost);
                return;
            }
        };
        for ev in events {
            if ev.mask.contains(EventMask::Q_OVERFLOW) {
                sink(Mark::Lost);
                continue;
            }
            let entry = lock(&shared.paths).get(&ev.wd).cloned();
            if ev.mask.contains(EventMask::IGNORED) {
                lock(&shared.paths).remove(&ev.wd);
            }
            let Some((dir, role)) = entry else { continue };
            let name = ev.name.map(OsStr::as_bytes);
            match role {
                Role::Sentinel => {
                    let nonce = name
                        .and_then(|n| n.strip_prefix(b"b"))
                        .filter(|n| n.len() == 32)
                        .and_then(|n| u128::from_str_radix(std::str::from_utf8(n).ok()?, 16).ok());
                    if let Some(nonce) = nonce {
                        let mut awaited = lock(&shared.awaited);
                        if let Some(seen) = awaited.get_mut(&nonce) {
                            *seen = true;
                            shared.arrived.notify_all();
                        }
                    }
                }
                Role::Git if name == Some(b"info") => {
                    sink(Mark::Broken(".git/info changed".into()))
                }
                Role::GitInfo if name == Some(b"exclude") => {
                    sink(Mark::Broken(".git/info/exclude changed".into()))
                }
                Role::Git | Role::GitInfo => {}
                Role::Tree => tree_event(&dir, name, ev.mask, sink),
            }
        }
    }
}

fn tree_event(dir: &Path, name: Option<&[u8]>, mask: EventMask, sink: &dyn Fn(Mark)) {
    let Some(name) = name else {
        // The watched folder itself went away or moved: its parent's listing says so, except
        // for the root.
        if dir.as_os_str().is_empty()
            && mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF)
        {
            sink(Mark::Broken("the root moved or was deleted".into()));
        }
        return;
    };
    if is_rule_name(name) {
        sink(Mark::Broken(format!(
            "{} changed",
            String::from_utf8_lossy(name)
        )));
        return;
    }
    let path = dir.join(OsStr::from_bytes(name));
    if mask.intersects(
        EventMask::CREATE | EventMask::DELETE | EventMask::MOVED_FROM | EventMask::MOVED_TO,
    ) {
        sink(Mark::Entries(dir.to_path_buf()));
        if mask.contains(EventMask::ISDIR) {
            // A folder moved in over a known name holds other files: walk it whole.
            sink(Mark::Relist(path));
        }
    } else if mask.contains(EventMask::ISDIR) {
        // Permissions of a folder: list it again.
        sink(Mark::Relist(path));
    } else {
        sink(Mark::Dirty(path));
    }
}
