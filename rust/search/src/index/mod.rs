//! A warm workspace index for grep (issue 16): trigrams of every file the default walk admits,
//! kept fresh by an inotify watch, so a query reads only the files that can match. The answer
//! is always the unindexed one: the real searcher runs on every candidate, and the walk's skip
//! counts are replayed from what the index recorded. glob lists files from it too. See
//! docs/search.md.

mod build;
mod cache;
pub mod config;
pub mod daemon;
mod key;
mod listing;
mod live;
mod mark;
mod plan;
mod postings;
mod private;
mod query;
mod registry;
mod snapshot;
mod state;
mod texts;
mod tree;
mod trigram;
mod validate;
#[cfg_attr(
    any(not(target_os = "linux"), feature = "portable"),
    path = "no_watch.rs"
)]
mod watch;

use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::glob::{GlobOutcome, GlobSort};
use crate::grep::{Grep, GrepOutcome};
use crate::walker::Walker;
use config::DaemonUse;
use toolroute_files::Roots;

pub(crate) fn key_of(walker: &Walker) -> Option<key::Key> {
    let o = walker.options();
    // Followed links can lead anywhere below the root: such walks are not indexed.
    if o.follow_symlinks {
        return None;
    }
    Some(key::Key {
        root: walker.root_path().to_path_buf(),
        hidden: o.hidden,
        no_ignore: o.no_ignore,
        require_git: o.require_git,
    })
}

/// grep through the index when one is ready for this walk and can answer (the daemon's, when
/// queries go to one, else this process's), else `scan` (the unindexed search); a scan counts
/// towards starting the index. The walker only provides the start, the filters and the display
/// to the index; `scan` may consume it.
pub fn grep(
    roots: &Roots,
    grep: &Grep,
    pattern: &str,
    walker: &Walker,
    scan: impl FnOnce() -> GrepOutcome,
) -> GrepOutcome {
    answer(
        roots,
        walker,
        |ix| query::grep(ix, grep, pattern, walker),
        || {
            // Progress is counted where the search runs: such a query stays here.
            if grep.counts_progress() {
                daemon::Answer::Unavailable
            } else {
                daemon::grep(walker, grep, pattern)
            }
        },
        scan,
    )
}

/// glob through the index when it can answer, else `scan` (the walk).
pub fn glob(
    roots: &Roots,
    walker: &Walker,
    sort: GlobSort,
    scan: impl FnOnce() -> GlobOutcome,
) -> GlobOutcome {
    answer(
        roots,
        walker,
        |ix| listing::glob(ix, walker, sort),
        || daemon::glob(walker, sort),
        scan,
    )
}

fn answer<T>(
    roots: &Roots,
    walker: &Walker,
    indexed: impl FnOnce(&live::Index) -> Option<T>,
    remote: impl FnOnce() -> daemon::Answer<T>,
    scan: impl FnOnce() -> T,
) -> T {
    let key = registry::enabled().then(|| key_of(walker)).flatten();
    let Some(key) = key else {
        return scan();
    };
    let live = registry::is_live(&key);
    if asks_daemon(live) {
        match remote() {
            daemon::Answer::Indexed(out) => return out,
            daemon::Answer::NotReady => {
                let out = scan();
                daemon::scanned(walker);
                return out;
            }
            // No daemon (yet): this process's own index, as without one.
            daemon::Answer::Unavailable => {}
        }
    }
    // Only a cold answer (no live index before it: a restore and check, or a scan) counts
    // towards starting a daemon; a warm index's slow query does not.
    let began = Instant::now();
    if let Some(out) = local(&key, roots, walker, indexed) {
        if !live {
            daemon::answered_here(began.elapsed());
        }
        return out;
    }
    let scanning = Instant::now();
    let out = scan();
    registry::scanned(&key, roots, scanning.elapsed());
    if !live {
        daemon::answered_here(began.elapsed());
    }
    out
}

/// Whether a query goes to the daemon first: with `Auto`, only when this process holds no live
/// index of the tree (`live`) itself: a long-running process with a warm one answers from it.
fn asks_daemon(live: bool) -> bool {
    match daemon::mode() {
        DaemonUse::Off => false,
        DaemonUse::On => true,
        DaemonUse::Auto => !live,
    }
}

/// The answer of this process's ready index for `key`, if it has one and it indexes the very
/// folder the walk is beneath (not another one since put at the same path).
pub(crate) fn local<T>(
    key: &key::Key,
    roots: &Roots,
    walker: &Walker,
    indexed: impl FnOnce(&live::Index) -> Option<T>,
) -> Option<T> {
    let ix = registry::ready(key, roots)?;
    if !ix.indexes(walker.root().as_fd()) {
        return None;
    }
    indexed(&ix)
}

/// Start the index for this walk's settings now and wait (at most `timeout`) until it is ready
/// and up to date with every change made before the call (a change that breaks it, such as a new
/// `.git`, is seen here and the index rebuilt). With a daemon, the daemon's.
pub fn warm(roots: &Roots, walker: &Walker, timeout: Duration) -> bool {
    let Some(key) = key_of(walker) else {
        return false;
    };
    if asks_daemon(registry::is_live(&key)) {
        if let Some(ready) = daemon::warm(walker, timeout) {
            return ready;
        }
    }
    warm_here(&key, roots, timeout)
}

/// [`warm`] in this process's registry.
pub(crate) fn warm_here(key: &key::Key, roots: &Roots, timeout: Duration) -> bool {
    let until = Instant::now() + timeout;
    loop {
        // A cached index, once checked, is as good as a build.
        let index = registry::ready(key, roots).unwrap_or_else(|| registry::ensure(key, roots));
        match index.phase() {
            state::Phase::Ready if index.fresh().is_some() => return true,
            state::Phase::Ready | state::Phase::Building => {}
            _ => return false,
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What the index for this walk's settings holds.
#[derive(Debug, Default, Clone)]
pub struct IndexStats {
    /// `none`, `building`, `ready`, `broken: why` or `unusable: why`.
    pub state: String,
    /// Files indexed.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Memory the index holds, in bytes.
    pub memory: usize,
    /// Files marked changed, to read again before they are trusted.
    pub dirty: usize,
    /// Folders the watch follows.
    pub watched: usize,
    /// Kept fresh by the watch (else by checking every file before each answer).
    pub watching: bool,
    /// Queries it answered.
    pub served: u64,
    /// How long its build took, when this process built it.
    pub build_seconds: Option<f64>,
    /// Read back from the on-disk cache rather than built by this process.
    pub restored: bool,
    /// Bytes of file texts kept in memory for the candidate scan (`texts.rs`).
    pub texts: usize,
}

/// What the index for this walk's settings holds (the daemon's, when queries go to one).
pub fn stats(walker: &Walker) -> IndexStats {
    let Some(key) = key_of(walker) else {
        return IndexStats {
            state: "none".into(),
            ..IndexStats::default()
        };
    };
    if asks_daemon(registry::is_live(&key)) {
        if let Some(s) = daemon::stats(walker) {
            return s;
        }
    }
    stats_here(&key)
}

/// [`stats`] of this process's registry.
pub(crate) fn stats_here(key: &key::Key) -> IndexStats {
    let Some(index) = registry::get(key) else {
        return IndexStats {
            state: "none".into(),
            ..IndexStats::default()
        };
    };
    let watched = index.watched();
    let state = index.state.lock().unwrap_or_else(|e| e.into_inner());
    let name = match &state.phase {
        state::Phase::Building => "building".to_string(),
        state::Phase::Ready => "ready".to_string(),
        state::Phase::Broken(why) => format!("broken: {why}"),
        state::Phase::Unusable(why) => format!("unusable: {why}"),
    };
    IndexStats {
        state: name,
        files: state.files(),
        bytes: state.bytes,
        memory: state.memory(),
        dirty: state.dirty(),
        watched,
        watching: index.watching(),
        served: index.served.load(std::sync::atomic::Ordering::Relaxed),
        build_seconds: state.build_time.map(|d| d.as_secs_f64()),
        restored: index.restored,
        texts: state.texts.bytes(),
    }
}

/// A file the tools wrote (absolute path): every index holding it reads it fresh next time,
/// even before the watcher reports the change.
pub fn note_written(path: &Path) {
    registry::touched(path);
}

/// The index registry as the file layer's write observer (installed when an index first goes live).
pub(crate) struct IndexObserver;

impl toolroute_files::WriteObserver for IndexObserver {
    fn active(&self) -> bool {
        active()
    }

    fn written(&self, path: &Path) {
        note_written(path);
    }
}

/// Whether any index is live in this process (else writes need not be reported).
pub fn active() -> bool {
    registry::active()
}
