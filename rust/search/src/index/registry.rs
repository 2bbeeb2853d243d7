//! The per-process registry: one index per (root, walk settings), shared by every caller, built
//! in the background from the second query on a key (or restored from the disk cache on the
//! first), evicted when unused for a while, and, when more are live, or they hold more memory,
//! than the budget allows (a server with hundreds of users, each with a workspace), the least
//! recently used goes first: each live index holds a thread, an inotify descriptor and
//! a folder descriptor, and the process's descriptors are limited (1,024 by default).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustc_hash::FxHashMap;

use super::cache;
use super::config::IndexConfig;
use super::key::Key;
use super::live::Index;
use super::state::Phase;
use toolroute_files::Roots;

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

/// Whether indexes are used at all.
pub(crate) fn enabled() -> bool {
    IndexConfig::current().enabled
}

/// Unused indexes are dropped after this long.
fn ttl() -> Duration {
    IndexConfig::current().ttl
}

/// Live indexes kept at once; starting one more evicts the least recently used.
fn max_live() -> usize {
    IndexConfig::current().max_live
}

/// Bytes all live indexes may hold together: past it the least recently used go (to the disk
/// cache, from which they come back), not only by age or count. One index larger than the
/// budget on its own is kept.
fn max_memory() -> usize {
    IndexConfig::current().memory
}

/// Keys seen once and not (yet) indexed, kept at most this many (each is a path and settings).
const MAX_SEEN: usize = 4096;

/// Make room for one more live index: drop the least recently used while the budget is full.
/// A dropped index's thread sees it is no longer current within its next tick and lets its
/// descriptors go.
fn make_room(map: &mut FxHashMap<Key, Entry>) {
    evict(map, max_live() - 1, None);
    let seen = map.values().filter(|e| matches!(e, Entry::Seen)).count();
    if seen > MAX_SEEN {
        map.retain(|_, e| !matches!(e, Entry::Seen));
    }
}

/// Drop the least recently used live indexes (never `keep`) while more than `count` are live or
/// together they hold more than the memory budget.
fn evict(map: &mut FxHashMap<Key, Entry>, count: usize, keep: Option<&Key>) {
    let budget = max_memory();
    loop {
        let live: Vec<(&Key, std::time::Instant, usize)> = map
            .iter()
            .filter_map(|(k, e)| match e {
                Entry::Live(ix) => Some((
                    k,
                    *ix.last_used.lock().unwrap_or_else(|e| e.into_inner()),
                    ix.held.load(std::sync::atomic::Ordering::Relaxed),
                )),
                Entry::Seen => None,
            })
            .collect();
        let held: usize = live.iter().map(|(_, _, bytes)| bytes).sum();
        if live.len() <= count && held <= budget {
            break;
        }
        let Some(oldest) = live
            .iter()
            .filter(|(k, _, _)| Some(*k) != keep)
            .min_by_key(|(_, used, _)| *used)
            .map(|(k, _, _)| (*k).clone())
        else {
            break;
        };
        map.remove(&oldest);
    }
}

/// An index now knows its size (built or restored): make the others fit the budget beside it.
fn rebalance(index: &Index) {
    with(|map| evict(map, max_live(), Some(&index.key)));
}

/// The ready index for `key`, if any: a live one, or, for a key this process has not met yet,
/// the one the cache holds (checked against the tree before it answers).
pub(crate) fn ready(key: &Key, roots: &Roots) -> Option<Arc<Index>> {
    let unknown = with(|map| match map.get(key) {
        Some(Entry::Live(ix)) => Err((ix.phase() == Phase::Ready).then(|| Arc::clone(ix))),
        Some(Entry::Seen) => Err(None),
        None => Ok(()),
    });
    if let Err(live) = unknown {
        return live;
    }
    // Read off the registry's lock: other keys' queries go on meanwhile.
    let contents = cache::load(key)?;
    with(|map| {
        if map.contains_key(key) {
            return None; // another query got here first
        }
        make_room(map);
        let index = Index::restore(key.clone(), roots.clone(), contents);
        spawn(map, key, &index).then_some(index)
    })
}

/// A query on `key` was answered by a scan that took `took`: note it, or start the build on the
/// second one (or again once broken); a scan quicker than the `min_scan` setting does not count.
/// Called after the scan returns, so the build never slows the query that starts it.
pub(crate) fn scanned(key: &Key, roots: &Roots, took: Duration) {
    if took < IndexConfig::current().min_scan {
        return;
    }
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

/// Whether this process holds a live index for `key` (building or ready).
pub(crate) fn is_live(key: &Key) -> bool {
    with(|map| matches!(map.get(key), Some(Entry::Live(_))))
}

pub(crate) fn get(key: &Key) -> Option<Arc<Index>> {
    with(|map| match map.get(key) {
        Some(Entry::Live(ix)) => Some(Arc::clone(ix)),
        _ => None,
    })
}

fn start(map: &mut FxHashMap<Key, Entry>, key: &Key, roots: &Roots) -> Arc<Index> {
    map.remove(key); // a broken one being replaced does not count against the budget
    make_room(map);
    let index = Index::new(key.clone(), roots.clone());
    spawn(map, key, &index);
    index
}

/// List `index` and start its background thread; false (and not listed) if no thread starts.
fn spawn(map: &mut FxHashMap<Key, Entry>, key: &Key, index: &Arc<Index>) -> bool {
    toolroute_files::install_write_observer(&super::IndexObserver); // writes are reported from now on
    map.insert(key.clone(), Entry::Live(Arc::clone(index)));
    let worker = Arc::clone(index);
    let spawned = std::thread::Builder::new()
        .name("toolroute-index".into())
        .spawn(move || run(&worker));
    if spawned.is_err() {
        map.remove(key);
    }
    spawned.is_ok()
}

/// The index's background thread: build (and save it), or start watching a restored one, then
/// fold changed files back (saving the index once they are in) until evicted.
fn run(index: &Arc<Index>) {
    if index.restored {
        rebalance(index);
        index.watch_restored();
    } else {
        index.build();
        rebalance(index);
        index.persist(true);
    }
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
        if index.fold(256) == 0 {
            index.persist(false);
        }
    }
    // Its inotify descriptor and thread go now; the file list and postings with the last Arc.
    index.stop_watching();
    index.persist(true);
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
