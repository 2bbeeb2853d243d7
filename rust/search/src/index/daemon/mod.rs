//! The index daemon (issue 25's cold start): one long-lived process per user and environment
//! that holds the warm indexes, so a new process (a CLI call, a restarted agent) asks it
//! instead of paying a scan or a restore. It is what git's fsmonitor daemon and watchman are
//! to their tools: the only record of what changed since the last process is a watch that
//! never stopped, and checking every file's stamps costs several warm queries.
//!
//! Linux only. By default (`auto`) a process whose first answer for a tree was slow (a large
//! tree: `_DAEMON_AFTER`) starts one for the processes after it, and a process without a live
//! index of its own asks the daemon if one runs; with `TOOLROUTE_SEARCH_INDEX_DAEMON=1` every
//! query asks it, and the first process that finds none starts one
//! (`python -m toolroute.search_daemon`) and scans; `0` turns it off; later processes' queries
//! go to it over a Unix socket in the private cache folder. A query carries the walk's root as
//! a descriptor opened for reading: the daemon searches beneath that descriptor only, and takes
//! the root's path from the kernel, never from the client, so no client reads a tree it could
//! not read itself. Either side speaks only to a peer of its own user (`SO_PEERCRED`), and a
//! client must show the key the daemon left in the private folder (`place::Key`), which a
//! confined command of the same user cannot read. Whatever goes wrong (no daemon, a refusal,
//! a damaged reply, a timeout), the client scans, as without one.

#[cfg(target_os = "linux")]
mod client;
#[cfg(not(target_os = "linux"))]
#[path = "elsewhere.rs"]
mod client;
#[cfg(target_os = "linux")]
mod place;
#[cfg(target_os = "linux")]
mod server;
#[cfg(target_os = "linux")]
mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::config::{DaemonUse, IndexConfig};

pub use client::{answered, serve, set_command, stop};
pub(crate) use client::{glob, grep, scanned, start, stats, warm, Answer};

/// Set in the daemon itself: its own queries use its own registry, never a daemon.
static IN_DAEMON: AtomicBool = AtomicBool::new(false);

/// How this process's queries use a daemon (`TOOLROUTE_SEARCH_INDEX_DAEMON`; never in the
/// daemon itself).
pub(crate) fn mode() -> DaemonUse {
    mode_of(&IndexConfig::current())
}

fn mode_of(config: &IndexConfig) -> DaemonUse {
    if toolroute_files::NATIVE_LINUX && !IN_DAEMON.load(Ordering::Relaxed) {
        config.daemon
    } else {
        DaemonUse::Off
    }
}

/// A query was answered without a daemon in `took`: with `Auto`, a slow one starts a daemon,
/// so the next process's first query finds the tree warm.
pub(crate) fn answered_here(took: Duration) {
    let config = IndexConfig::current();
    if mode_of(&config) == DaemonUse::Auto && took >= config.daemon_after {
        start();
    }
}
