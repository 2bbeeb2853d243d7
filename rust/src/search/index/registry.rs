//! The per-process registry: one index per (root, walk settings), shared by every caller, built
//! in the background from the second query on a key, evicted when unused for a while.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustc_hash::FxHashMap;

use super::live::{Index, Key};
use super::state::Phase;
use crate::files::confine::Roots;

enum Entry {
    /// One query ran: the next one starts a build (a single query never pays for one).
    Seen,
    Live(Arc<Index>),
}

static REGISTRY: Mutex<Option<FxHashMap<Key, Entry>>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut FxHashMap<Key, Entry>) -> R) -> R {
    let mut guard = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(FxHashMap::default))
}

/// `TOOLROUTE_SEARCH_INDEX=0` turns the index off.
pub(crate) fn enabled() -> bool {
    std::env::var("TOOLROUTE_SEARCH_INDEX").map_or(true, |v| v != "0")
}

/// Unused indexes are dropped after this long (`TOOLROUTE_SEARCH_INDEX_TTL`, seconds).
fn ttl() -> Duration {
    let secs = std::env::var("TOOLROUTE_SEARCH_INDEX_TTL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    Duration::from_secs(secs)
}

/// The ready index for `key`, if any.
pub(crate) fn ready(key: &Key) -> Option<Arc<Index>> {
    with(|map| match map.get(key) {
        Some(Entry::Live(ix)) if ix.phase() == Phase::Ready => Some(Arc::clone(ix)),
        _ => None,
    })
}

/// A query on `key` was answered by a scan: note it, or start the build on the second one (or
/// again once broken). Called after the scan returns, so the build never slows the query that
/// starts it.
pub(crate) fn scanned(key: &Key, roots: &Roots) {
    with(|map| match map.get(key) {
        None => {
            map.insert(key.clone(), Entry::Seen);
        }
        Some(Entry::Seen) => {
            start(map, key, roots);
        }
        Some(Entry::Live(ix)) => {
            if matches!(ix.phase(), Phase::Broken(_)) {
                start(map, key, roots);
            }
        }
    })
}

/// Start (or restart) the build for `key` now, and return the index.
pub(crate) fn ensure(key: &Key, roots: &Roots) -> Arc<Index> {
    with(|map| match map.get(key) {
        Some(Entry::Live(ix)) if !matches!(ix.phase(), Phase::Broken(_)) => Arc::clone(ix),
        _ => start(map, key, roots),
    })
}

pub(crate) fn get(key: &Key) -> Option<Arc<Index>> {
    with(|map| match map.get(key) {
        Some(Entry::Live(ix)) => Some(Arc::clone(ix)),
        _ => None,
    })
}

fn start(map: &mut FxHashMap<Key, Entry>, key: &Key, roots: &Roots) -> Arc<Index> {
    let index = Index::new(key.clone(), roots.clone());
    map.insert(key.clone(), Entry::Live(Arc::clone(&index)));
    let worker = Arc::clone(&index);
    let spawned = std::thread::Builder::new()
        .name("toolroute-index".into())
        .spawn(move || run(&worker));
    if spawned.is_err() {
        map.remove(key);
    }
    index
}

/// The index's background thread: build, then fold changed files back until evicted.
fn run(index: &Arc<Index>) {
    index.build();
    let ttl = ttl();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let idle = index
            .last_used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed();
        let current = with(
            |map| matches!(map.get(&index.key), Some(Entry::Live(ix)) if Arc::ptr_eq(ix, index)),
        );
        if !current || idle > ttl || index.doomed() || matches!(index.phase(), Phase::Broken(_)) {
            break;
        }
        index.fold(256);
    }
    // Its inotify descriptor and thread go now; the file list and postings with the last Arc.
    index.stop_watching();
    // A broken index stays listed so the next query replaces it at once.
    with(|map| {
        let current =
            matches!(map.get(&index.key), Some(Entry::Live(ix)) if Arc::ptr_eq(ix, index));
        if current && !matches!(index.phase(), Phase::Broken(_)) {
            map.remove(&index.key);
        }
    });
}

/// A file the tools wrote (absolute path): every index holding it reads it fresh next time.
pub(crate) fn touched(path: &Path) {
    let live: Vec<Arc<Index>> = with(|map| {
        map.values()
            .filter_map(|e| match e {
                Entry::Live(ix) if path.starts_with(&ix.key.root) => Some(Arc::clone(ix)),
                _ => None,
            })
            .collect()
    });
    for ix in live {
        ix.touched(path);
    }
}

pub(crate) fn active() -> bool {
    with(|map| map.values().any(|e| matches!(e, Entry::Live(_))))
}
