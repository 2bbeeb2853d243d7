//! Who hears of committed writes. A layer above (the search index) installs an observer; the
//! transaction tells it what it wrote, without knowing who listens: the file layer depends on
//! nothing above it.

use std::path::Path;
use std::sync::OnceLock;

/// Told of every file a transaction committed or rolled back, before the call returns.
pub trait WriteObserver: Sync {
    /// Whether anyone is listening now (when not, the paths are not even worked out).
    fn active(&self) -> bool;
    /// `path` (resolved) was written.
    fn written(&self, path: &Path);
}

static OBSERVER: OnceLock<&'static dyn WriteObserver> = OnceLock::new();

/// Install the process's observer; the first one installed stays (there is one index registry).
pub fn install(observer: &'static dyn WriteObserver) {
    let _ = OBSERVER.set(observer);
}

/// The observer, when one is installed and listening.
pub(crate) fn listening() -> Option<&'static dyn WriteObserver> {
    OBSERVER.get().copied().filter(|o| o.active())
}
